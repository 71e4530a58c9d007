"""``fifo_floor`` (reorder): a job is overtaken by later arrivals for at most a bounded share of its own service.

The sort (smallest remaining service first) lets jobs that arrived later go ahead of a job that FIFO
would serve before them: that is where its gains come from, and also how a job ends up far slower than
under FIFO (a batch's first job, served first by FIFO, waits behind every smaller one). The floor keeps
each job within reach of its FIFO place: the jobs registered after it that the order puts ahead of it,
counting only those that can compete for its clients, may hold at most ``overtake x`` its own remaining
service (remaining rounds x demand). Where they hold more, the job is moved ahead of the nearest of them
until they do not, never ahead of a job registered before it.

Why: were the pool served one job at a time, a job's JCT under FIFO is at least its own service, and what
the floor lets pass it adds at most ``overtake x`` that, so no job takes more than ``1 + overtake`` times its
FIFO JCT from the order alone. Jobs registered before it are not counted (FIFO serves them first too).
Two jobs compete unless their public constraints exclude each other (disjoint ranges or value sets of a
shared attribute): a job of a disjoint class takes none of its clients. An open-ended job has no service
to bound (it is never moved; counted ahead of another job it is always too much). The floor applies from
registration and needs no history; streams of later arrivals are the ``starvation_bound``'s concern, since
the floor looks at the jobs open now.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.options import NonNegative
from policies.plugins.base import ReorderPlugin
from policies.srsf import remaining_service
from propius.specs import Constraint, Constraints

__all__ = ["FifoFloor", "compete"]


def compete(a: Constraints, b: Constraints) -> bool:
    """Whether some client could satisfy both: False only when a shared attribute's constraints are disjoint."""
    return all(_overlap(a.root[name], b.root[name]) for name in a.root.keys() & b.root.keys())


def _overlap(a: Constraint, b: Constraint) -> bool:
    if a.in_ is not None and b.in_ is not None:
        return bool(a.in_ & b.in_)
    if a.in_ is not None or b.in_ is not None:
        return True  # a value set against a range: not worth deciding here, assume they compete
    low = max(-math.inf if a.min is None else a.min, -math.inf if b.min is None else b.min)
    high = min(math.inf if a.max is None else a.max, math.inf if b.max is None else b.max)
    return low <= high


class FifoFloor(ReorderPlugin):
    name: ClassVar[str] = "fifo_floor"
    overtake: NonNegative = 0.5

    def reorder(self, ordered: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        publics = {job.eligibility_key: job.public for job in ordered}
        competing = frozenset((a, b) for a in publics for b in publics if _compete(a, b, publics))
        jobs = tuple((job.registered_at, job.job_id, remaining_service(job), job.eligibility_key) for job in ordered)
        return [ordered[i] for i in _floored(jobs, competing, self.overtake)]


_COMPETE: dict[tuple[str, str], bool] = {}


def _compete(a: str, b: str, publics: dict[str, Constraints]) -> bool:
    """:func:`compete` of two classes, by key (a class's key is its public constraints' JSON); memoised."""
    if a == b:
        return True
    if (a, b) not in _COMPETE:
        if len(_COMPETE) > 4096:
            _COMPETE.clear()
        _COMPETE[a, b] = compete(publics[a], publics[b])
    return _COMPETE[a, b]


@lru_cache(maxsize=1024)
def _floored(jobs: tuple[tuple[float, str, float, str], ...], competing: frozenset[tuple[str, str]],
             overtake: float) -> tuple[int, ...]:
    """The floor's order, as indices into ``jobs`` ((registered_at, job_id, remaining service, class) in the
    sorted order). Cached: the order is recomputed after every bind, but it changes only when a round closes
    or a job comes or goes."""
    arrival = {i: rank for rank, i in enumerate(sorted(range(len(jobs)), key=lambda i: jobs[i][:2]))}
    order = [(arrival[i], service, key, i) for i, (_, _, service, key) in enumerate(jobs)]
    # Oldest first: a job moves up only past jobs registered after it, so it never adds to the
    # overtakers of a job already placed.
    for mine in range(len(order)):
        at = next(i for i, entry in enumerate(order) if entry[0] == mine)
        _, own, key, _ = order[at]
        budget = overtake * own
        if math.isinf(budget):
            continue
        ahead = [entry[1] for entry in order[:at] if entry[0] > mine and (key, entry[2]) in competing]
        unbounded, held = sum(map(math.isinf, ahead)), sum(s for s in ahead if not math.isinf(s))
        while (unbounded or held > budget) and at > 0 and order[at - 1][0] > mine:
            passed = order[at - 1]
            if (key, passed[2]) in competing:
                if math.isinf(passed[1]):
                    unbounded -= 1
                else:
                    held -= passed[1]
            order[at - 1], order[at] = order[at], passed
            at -= 1
    return tuple(entry[3] for entry in order)
