"""A policy plug-in and the named extension points a profile (:mod:`policies.profile`) wires plug-ins into.

Modelled on the Kubernetes scheduling framework's profiles: a plug-in implements one extension point,
a profile lists plug-ins with their options, and :class:`~policies.profile_policy.ProfilePolicy` calls
them through the ordinary :class:`~policies.base.Policy` interface, so the scheduling core, live and in
the simulator, does not know profiles exist. The points, in the order a decision calls them:

========== ================================================ =========================================
point      called                                           combined
========== ================================================ =========================================
admit      per open job: may it be served now?              all must admit (default: every job)
sort       per admitted job: its score, lower first         at most one plug-in (default: FIFO)
reorder    per decision: the sorted order, a job moved      applied in profile order
           ahead of others (a bound on being overtaken)
promote    per job: serve it ahead of the order?            promoted jobs first, lowest key first
partition  per check-in: split the client's jobs into       at most one plug-in (default: one group)
           groups, offered group by group
pin        per group: keep its head job from this client?   the head is dropped if any plug-in says so
offer      per check-in: the offers, as a list              applied in profile order
wake       when slots open: which waiting clients first     the first plug-in with a key
========== ================================================ =========================================

A plug-in is a frozen pydantic model whose fields are its options, so a profile's options are typed,
ranged and refused by name (``extra="forbid"``). A plug-in reads time only from ``ctx.now`` and keeps
no state between calls: the same inputs give the same decision live, in the simulator and after a restart.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from policies.base import ClientEstimate, JobView, SchedulingContext

__all__ = [
    "POINTS",
    "AdmitPlugin",
    "OfferFilter",
    "OfferPlugin",
    "PartitionPlugin",
    "PinPlugin",
    "Plugin",
    "Point",
    "PromotePlugin",
    "ReorderPlugin",
    "SortPlugin",
    "WakePlugin",
]

Point = Literal["admit", "sort", "reorder", "promote", "partition", "pin", "offer", "wake"]
POINTS: tuple[Point, ...] = ("admit", "sort", "reorder", "promote", "partition", "pin", "offer", "wake")


class Plugin(BaseModel):
    """One plug-in; its fields are its options. Subclass one of the point classes below, not this one.

    Attributes
    ----------
    name : str
        The name a profile lists it under (and, for a third party's plug-in, its entry point's name).
    point : Point
        The extension point it implements.
    wants_fastest_fill : bool
        Whether it reads ``JobView.fastest_fill_at`` (estimated for the head job only on request).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]
    point: ClassVar[Point]
    wants_fastest_fill: ClassVar[bool] = False


class AdmitPlugin(Plugin):
    """``admit``: hold a job back (a quota, a budget) without knowing how the others are ordered."""

    point: ClassVar[Point] = "admit"

    @abstractmethod
    def admit(self, job: JobView, ctx: SchedulingContext) -> bool:
        """False for a job that must not be served now."""


class SortPlugin(Plugin):
    """``sort``: the global order's score; ties fall back to ``(registered_at, job_id)``, i.e. FIFO."""

    point: ClassVar[Point] = "sort"

    @abstractmethod
    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        """The job's score; lower is served first, ``math.inf`` last."""


class ReorderPlugin(Plugin):
    """``reorder``: adjust the sorted order where a rule is about pairs of jobs, not one job's score."""

    point: ClassVar[Point] = "reorder"

    @abstractmethod
    def reorder(self, ordered: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        """``ordered`` (the sorted admitted jobs), reordered; the same jobs, none added or dropped."""


class PromotePlugin(Plugin):
    """``promote``: jobs served ahead of the sorted order, and offered to every client (never pinned)."""

    point: ClassVar[Point] = "promote"

    @abstractmethod
    def promote(self, job: JobView, ctx: SchedulingContext) -> float | None:
        """A key (lowest first among promoted jobs) for a job to serve ahead of the order; None: not promoted."""


class PartitionPlugin(Plugin):
    """``partition``: the groups a client's eligible jobs are offered in, group by group."""

    point: ClassVar[Point] = "partition"

    @abstractmethod
    def partition(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[list[JobView]]:
        """``jobs`` (in the global order) split into ordered groups, each keeping the global order."""


class PinPlugin(Plugin):
    """``pin``: keep a group's head job from this client (it waits for a better one), the rest offered."""

    point: ClassVar[Point] = "pin"

    @abstractmethod
    def pinned_elsewhere(self, head: JobView, ctx: SchedulingContext) -> bool:
        """True when ``head`` should not be offered to ``ctx.client``."""


class OfferPlugin(Plugin):
    """``offer``: filter (or reorder) the list of jobs offered to one checking-in client."""

    point: ClassVar[Point] = "offer"

    @abstractmethod
    def offers(self, ranked: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        """The jobs to offer, first offered first; a job left out is not offered to this client now."""


class OfferFilter(OfferPlugin):
    """An ``offer`` plug-in that judges each job on its own."""

    def offers(self, ranked: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        return [job for job in ranked if self.keeps(job, ctx)]

    @abstractmethod
    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        """False to keep ``job`` from ``ctx.client`` now."""


class WakePlugin(Plugin):
    """``wake``: which idle clients a free slot of a job wakes first."""

    point: ClassVar[Point] = "wake"

    @property
    def wake_narrower_penalty(self) -> float:
        """How many times slower its key counts a waiter a smaller class's open round still needs
        (:attr:`policies.base.Policy.wake_narrower_penalty`); 1.0: no penalty."""
        return 1.0

    @abstractmethod
    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        """A sort key over waiting clients (lowest woken first), or None for no opinion."""
