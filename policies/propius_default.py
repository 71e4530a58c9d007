"""``propius``, the default policy: IRS's class-aware order, contention-aware admission, informed dispatch.

IRS (see :mod:`policies.irs`) decides which class and job a client should serve. What it does not
ask is whether the bind will pay off. A bind that does not deliver costs twice: the client is blocked
for nothing, and the round may miss its deadline and be run again. Measured on the policy-20jobs
workload, most failed rounds under IRS are rounds that never got ``demand`` clients: a low-priority
job receives a trickle of clients whenever the jobs ahead of it are full, and loses them (and the
work they did) at its deadline. Each rule below is an option, so a benchmark can show what it buys.

- ``speed_tiers`` (from IRS, on): pin a group's head job to the fastest learned speed tier when its
  response collection dominates its scheduling delay.
- ``admission`` (off by default: measured, it lengthens JCT, see docs/policies.md): jobs are
  admitted in priority order while they fit. A job fits when the bind targets
  of the admitted jobs that draw on no more clients than it (supply at most its own), its own
  included, add up to at most ``admission_load x`` its class's supply. For nested classes that is
  Hall's condition on the chain of classes, i.e. every admitted round can be filled at once. The
  first job is always admitted; the others wait with no clients instead of a trickle, so their
  rounds fail without wasting anyone, and start once the jobs ahead free their clients.
- ``deadline_aware``: do not bind a client predicted (from its learned speed and bandwidth) to
  finish after the round's deadline; it would only ever be a straggler.
- ``availability_aware``: do not bind a client whose session is predicted (from its learned typical
  session length) to end before the task would.
- ``adaptive_over_selection``: stop offering a round once its expected results (results plus each
  working client weighted by its learned reliability) reach ``demand + z x sqrt(demand)``, instead of
  always filling ``demand x over_selection``. Off by default: measured, the later ``demand``-th result
  costs more JCT than the saved binds win back (see docs/policies.md).

- ``aging_tau_s`` (0 = off): starvation guard; the score (remaining service) is divided by
  ``1 + age / aging_tau_s``, ``age`` being the time since the job registered, so a job's priority
  rises the longer it waits. It reorders jobs inside a class group only (IRS's class order stays).
- ``fill_first`` (off): inside a class group, offer rounds that already hold some clients before
  empty ones, so started rounds fill and complete instead of being dribbled into and failed.

Both are off by default: measured on policy-20jobs they did not help (see docs/policies.md).

Unknown estimates never exclude anyone: a client without history, or a snapshot without the
optional fields (the live control plane today), gets plain IRS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar

from policies.base import ClientEstimate, JobView, SchedulingContext
from policies.irs import IrsPolicy
from propius.specs import AttributeValue

__all__ = ["PropiusPolicy", "admitted"]


def admitted(ordered: Sequence[JobView], supply: Mapping[str, int], load: float) -> list[JobView]:
    """The prefix-feasible subset of ``ordered`` (see the module docstring); the first always fits."""
    kept: list[tuple[int, int]] = []  # (class supply, target) of admitted jobs
    result: list[JobView] = []
    for job in ordered:
        own = supply.get(job.eligibility_key, job.supply)
        need = job.target + sum(target for s, target in kept if s <= own)
        if not result or need <= load * own:
            kept.append((own, job.target))
            result.append(job)
    return result


class PropiusPolicy(IrsPolicy):
    name: ClassVar[str] = "propius"

    def __init__(
        self, merge: bool = True, speed_tiers: bool = True, admission: bool = False, admission_load: float = 1.0,
        deadline_aware: bool = True, availability_aware: bool = True, adaptive_over_selection: bool = False,
        margin_z: float = 1.0, aging_tau_s: float = 0.0, fill_first: bool = False,
    ) -> None:
        super().__init__(merge=merge, speed_tiers=speed_tiers)
        self.admission = admission
        self.admission_load = admission_load
        self.deadline_aware = deadline_aware
        self.availability_aware = availability_aware
        self.adaptive_over_selection = adaptive_over_selection
        self.margin_z = margin_z
        self.aging_tau_s = aging_tau_s
        self.fill_first = fill_first

    @property
    def _reorders_groups(self) -> bool:  # type: ignore[override]
        return self.fill_first

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        base = super().score(job, ctx)
        if self.aging_tau_s <= 0 or math.isinf(base):
            return base
        return base / (1.0 + max(0.0, ctx.now - job.registered_at) / self.aging_tau_s)

    def _order_group(self, members: list[JobView], ctx: SchedulingContext) -> list[JobView]:
        if not self.fill_first:
            return members
        started = [job for job in members if 0 < job.bound < job.target]
        return started + [job for job in members if not 0 < job.bound < job.target]

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        ordered = super().order(jobs, ctx)
        return admitted(ordered, ctx.supply_by_class, self.admission_load) if self.admission else ordered

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        ranked = super().rank_for_client(attributes, jobs, ctx)
        return [job for job in ranked if self._worth_binding(job, ctx.client, ctx.now)]

    def _worth_binding(self, job: JobView, client: ClientEstimate | None, now: float) -> bool:
        if self.adaptive_over_selection and self._satisfied(job):
            return False
        task_s = client.task_s(job) if client is not None else None
        if task_s is None:
            return True
        if self.deadline_aware and now + task_s > min(job.deadline_at, now + job.execution_timeout_s):
            return False
        if self.availability_aware:
            available_s = client.available_for_s(now)
            if available_s is not None and 0 < available_s < task_s:  # <= 0: the prediction already failed
                return False
        return True

    def _satisfied(self, job: JobView) -> bool:
        if job.expected_results is None:
            return False
        return job.expected_results >= job.demand + self.margin_z * math.sqrt(job.demand)
