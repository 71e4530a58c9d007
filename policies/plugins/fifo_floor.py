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


def _registered(job: JobView) -> tuple[float, str]:
    return job.registered_at, job.job_id


class FifoFloor(ReorderPlugin):
    name: ClassVar[str] = "fifo_floor"
    overtake: NonNegative = 0.5

    def reorder(self, ordered: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        arrival = sorted(range(len(ordered)), key=lambda i: _registered(ordered[i]))
        rank = {i: r for r, i in enumerate(arrival)}
        keys = {job.eligibility_key: job.public for job in ordered}
        kind = {key: k for k, key in enumerate(keys)}
        publics = list(keys.values())
        competes = [[a is b or compete(a, b) for b in publics] for a in publics]
        # (arrival rank, remaining service, class, job), in the sorted order
        order = [(rank[i], remaining_service(job), kind[job.eligibility_key], job) for i, job in enumerate(ordered)]
        # Oldest first: a job moves up only past jobs registered after it, so it never adds to the
        # overtakers of a job already placed.
        for mine in range(len(order)):
            at = next(i for i, entry in enumerate(order) if entry[0] == mine)
            _, own, cls, _ = order[at]
            budget, against = self.overtake * own, competes[cls]
            if math.isinf(budget):
                continue
            ahead = [entry[1] for entry in order[:at] if entry[0] > mine and against[entry[2]]]
            unbounded, held = sum(map(math.isinf, ahead)), sum(s for s in ahead if not math.isinf(s))
            while (unbounded or held > budget) and at > 0 and order[at - 1][0] > mine:
                passed = order[at - 1]
                if against[passed[2]]:
                    if math.isinf(passed[1]):
                        unbounded -= 1
                    else:
                        held -= passed[1]
                order[at - 1], order[at] = order[at], passed
                at -= 1
        return [entry[3] for entry in order]
