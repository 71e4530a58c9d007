"""The :class:`~policies.base.Policy` a profile builds: it calls its plug-ins at their extension points.

The scheduling core calls ``order``, ``rank_for_client``, ``wake_key`` and ``wants_fastest_fill`` as for
any policy; this class turns each call into the plug-ins' points (:mod:`policies.plugins.base`):

- ``order``: jobs that every ``admit`` plug-in admits, sorted by the ``sort`` plug-in's score (FIFO without
  one), then ``(registered_at, job_id)``, then adjusted by each ``reorder`` plug-in; the jobs a ``promote``
  plug-in promotes go first, lowest key first.
- ``rank_for_client``: the client's eligible jobs (in the global order), promoted ones first; the rest split
  into groups by the ``partition`` plug-in (one group without one); each group's head dropped when a ``pin``
  plug-in keeps it from this client (a promoted job is never pinned); then every ``offer`` plug-in in turn.
- ``wake_key``, ``wake_narrower_penalty``: the first ``wake`` plug-in's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from policies.base import ClientEstimate, JobView, Policy, SchedulingContext
from policies.plugins.base import (
    AdmitPlugin,
    OfferPlugin,
    PartitionPlugin,
    PinPlugin,
    Plugin,
    PromotePlugin,
    ReorderPlugin,
    SortPlugin,
    WakePlugin,
)
from propius.specs import AttributeValue

__all__ = ["ProfilePolicy"]


class ProfilePolicy(Policy):
    """A policy composed of plug-ins; build it with :meth:`policies.profile.Profile.policy`.

    Parameters
    ----------
    profile : str
        The profile's name, reported as the policy's ``name``.
    plugins : Sequence[Plugin]
        The plug-ins, in profile order.
    """

    name: ClassVar[str] = "profile"

    def __init__(self, profile: str, plugins: Sequence[Plugin]) -> None:
        self.profile = profile
        self.plugins = tuple(plugins)
        self._admit = [p for p in self.plugins if isinstance(p, AdmitPlugin)]
        self._sort = next((p for p in self.plugins if isinstance(p, SortPlugin)), None)
        self._reorder = [p for p in self.plugins if isinstance(p, ReorderPlugin)]
        self._promote = [p for p in self.plugins if isinstance(p, PromotePlugin)]
        self._partition = next((p for p in self.plugins if isinstance(p, PartitionPlugin)), None)
        self._pin = [p for p in self.plugins if isinstance(p, PinPlugin)]
        self._offer = [p for p in self.plugins if isinstance(p, OfferPlugin)]
        self._wake = [p for p in self.plugins if isinstance(p, WakePlugin)]

    def plugin(self, name: str) -> Plugin | None:
        """The plug-in listed as ``name``, with its options; None when the profile does not list it."""
        return next((p for p in self.plugins if p.name == name), None)

    @property
    def wants_fastest_fill(self) -> bool:
        return any(p.wants_fastest_fill for p in self.plugins)

    def filter(self, job: JobView, ctx: SchedulingContext) -> bool:
        return all(p.admit(job, ctx) for p in self._admit)

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return 0.0 if self._sort is None else self._sort.score(job, ctx)

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        ordered = super().order(jobs, ctx)
        for plugin in self._reorder:
            ordered = plugin.reorder(ordered, ctx)
        promoted, rest = self._promoted(ordered, ctx)
        return promoted + rest

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        ranked, rest = self._promoted(jobs, ctx)
        groups = [rest] if self._partition is None else self._partition.partition(rest, ctx)
        for group in groups:
            if group and any(p.pinned_elsewhere(group[0], _left_for(group[0], jobs, ctx)) for p in self._pin):
                group = group[1:]
            ranked.extend(group)
        for offer in self._offer:
            ranked = offer.offers(ranked, ctx)
        return ranked

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        return next((key for p in self._wake if (key := p.wake_key(job)) is not None), None)

    @property
    def wake_narrower_penalty(self) -> float:
        return next((p.wake_narrower_penalty for p in self._wake), 1.0)

    def _promoted(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> tuple[list[JobView], list[JobView]]:
        """(the promoted jobs, lowest key first; the others, in the given order)."""
        if not self._promote:
            return [], list(jobs)
        keys: dict[str, tuple[float, float, str]] = {}
        for job in jobs:
            found = [key for p in self._promote if (key := p.promote(job, ctx)) is not None]
            if found:
                keys[job.job_id] = (min(found), job.registered_at, job.job_id)
        promoted = sorted((job for job in jobs if job.job_id in keys), key=lambda job: keys[job.job_id])
        return promoted, [job for job in jobs if job.job_id not in keys]


def _left_for(head: JobView, jobs: Sequence[JobView], ctx: SchedulingContext) -> SchedulingContext:
    """``ctx`` with ``head``'s class supply less the bind targets of the class's other open rounds: what a pin
    plug-in may count on for ``head``'s round (``jobs`` are the client's eligible jobs, so every open round of
    ``head``'s class is among them)."""
    others = sum(job.target for job in jobs if job.eligibility_key == head.eligibility_key and job is not head)
    if not others:
        return ctx
    left = max(0, ctx.class_supply(head) - others)
    return dataclasses.replace(ctx, supply_by_class={**ctx.supply_by_class, head.eligibility_key: left})
