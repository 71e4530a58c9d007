"""IRS, Venn's Intersection Resource Scheduling, over the Propius plug-in points.

Jobs whose public requirements are equal form an eligibility class; classes overlap (a fast phone
qualifies for the strict class and every looser one). The problem IRS solves: a job in a scarce
class can only use the few clients that qualify for it, while a job in an abundant class can use
almost anyone, so serving whoever arrives in one global order lets abundant jobs eat the scarce
clients and starve the scarce jobs.

How a client is ranked (``rank_for_client``), with supply per class estimated by the scheduler from
recent check-ins (``ctx.supply_by_class``):

1. Scarce-class protection. The classes the client qualifies for are visited from the scarcest
   (fewest recent eligible clients) to the most abundant, so a client is offered first to the
   scarcest class it can serve, and to looser classes only after that.
2. Contention-aware merge. A more abundant class need not always wait behind a scarcer one: its
   contention is its queued jobs (jobs with free slots) per unit of supply. When that exceeds the
   contention of the scarcer group built so far, the two are merged, i.e. the larger class takes over
   a share of the scarcer class's clients, and their jobs compete in one order. Otherwise the scarcer
   group keeps priority. A merged group's supply is the largest member supply (exact for nested
   classes, where the larger class contains the smaller).
3. Inside a group, smallest remaining request first: remaining rounds x demand (as SRSF), ties by
   registration time and job id; this is also the global order (``score``).
4. Speed-tier matching. When the head job of a group spends much longer collecting responses than
   scheduling (``recent_response_s > k x recent_schedule_s`` with ``k`` tiers, since pinning to one of
   ``k`` tiers stretches scheduling about ``k`` times), it is pinned to the fastest speed tier: only
   clients whose learned speed is in that tier are offered it, the others go on to the next job.
   The tiers are cut per eligibility class, from the speeds of that class's own recent clients, as in
   Venn's testbed (``ctx.tiers_for(job)``; the global ``ctx.speed_tiers`` until the class has enough
   observed clients): the pinned tier holds ``1/k`` of the clients that may serve the job. Cut over all
   clients, a class at the slow end of the population would find almost none of its clients in the
   global fastest tier, and its pinned rounds would fail. A job is pinned only while that tier can fill
   its round (class supply at least ``k x`` its bind target): Venn pins only when ``k`` times the
   round's scheduling delay, estimated from the class's check-in rate, still fits the deadline, and
   here the measured scheduling delay says nothing of the rate (a round fed by idle clients has none),
   so the tier's size stands for it. Without tiers, or without the job's round timings, no job is
   pinned; a client of unknown speed is offered the pinned job, so it is tried and measured. The rule
   is :func:`pinned` and :func:`in_fastest_tier`, which the ``speed_tiers`` plug-in
   (:mod:`policies.plugins.speed_tiers`) applies too.
5. Fastest-first wakes. Venn's clients check in by themselves; here an idle client waits until a free
   slot wakes it (:mod:`control_plane.scheduling.wake`). Waking the oldest waiters for a pinned round
   would wake mostly clients outside its tier, who decline it, and the round would miss its deadline.
   So free slots wake the clients predicted to finish the job's task first (:func:`fastest_first`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from policies.base import ClientEstimate, JobView, Policy, SchedulingContext
from propius.specs import AttributeValue

__all__ = ["IrsPolicy", "class_groups", "fastest_first", "in_fastest_tier", "pinned"]


def class_groups(
    queued: Mapping[str, int], supply: Mapping[str, int], merge: bool = True
) -> list[list[str]]:
    """Classes grouped scarcest first; a class merges into the previous group when it is more contended.

    ``queued``: jobs waiting for clients per class; ``supply``: eligible clients per class.
    """
    groups: list[list[str]] = []
    group_queued = 0
    group_supply = 0
    for key in sorted(queued, key=lambda k: (supply.get(k, 0), k)):
        k_supply = max(supply.get(key, 0), 1)
        if merge and groups and queued[key] * group_supply > group_queued * k_supply:
            groups[-1].append(key)
            group_queued += queued[key]
            group_supply = max(group_supply, k_supply)
        else:
            groups.append([key])
            group_queued, group_supply = queued[key], k_supply
    return groups


def fastest_first(job: JobView, floors: bool = False) -> Callable[[ClientEstimate], float]:
    """Wake key: the predicted task time for ``job``. A client of unknown time ranks at the bound of the job's
    fastest tier (``job.fast_task_s``), after the clients known to be in it: the clients that stay unknown
    longest are those whose private requirements refuse the job, and ranked first they would be woken for
    every round and decline it, while the fast clients wait. With ``floors``, never below what the client is
    known to need at least (:meth:`~policies.base.ClientEstimate.task_floor_s`; the default's ``fastest_wake``,
    not IRS). It runs for every ranked waiter of every wake, so the floor is read only for a client that has one."""
    unknown = job.fast_task_s if job.fast_task_s is not None else 0.0

    def predicted_task_s(client: ClientEstimate) -> float:
        task_s = client.task_s(job)
        if task_s is None:
            task_s = unknown
        if floors and client.unfinished is not None:
            floor = client.task_floor_s(job)
            if floor is not None and floor > task_s:
                return floor
        return task_s

    return predicted_task_s


def pinned(head: JobView, ctx: SchedulingContext, tier_fit: bool = True) -> bool:
    """Whether ``head`` is pinned to the fastest of the ``k`` speed tiers of its class (step 4): its response
    collection is longer than ``k x`` its scheduling delay and, with ``tier_fit``, that tier can fill its
    round (class supply at least ``k x`` its bind target). False without tiers or round timings."""
    tiers = ctx.tiers_for(head)
    if not tiers or head.recent_response_s is None or head.recent_schedule_s is None:
        return False
    k = len(tiers) + 1
    if head.recent_response_s <= k * head.recent_schedule_s:
        return False
    return not tier_fit or ctx.class_supply(head) >= k * head.target  # the fastest tier can fill the round


def in_fastest_tier(head: JobView, ctx: SchedulingContext) -> bool:
    """Whether the client's learned speed is in the fastest tier of ``head``'s class, strictly below its
    bound. A client of unknown speed counts as fastest: it is offered the pinned job, so it is tried and
    measured (else a population of new clients would never be offered a pinned round, and the round would
    starve)."""
    speed = ctx.client.s_per_sample if ctx.client is not None else None
    return speed is None or bisect.bisect_right(ctx.tiers_for(head), speed) == 0


class IrsPolicy(Policy):
    """Venn's IRS (see the module docstring).

    Parameters
    ----------
    merge : bool, default True
        Merge a more contended, more abundant class into the scarcer group before it (step 2).
    speed_tiers : bool, default True
        Pin a group's head job to the fastest speed tier of its class when its response collection dominates
        (step 4), and wake the fastest waiting clients first (step 5).
    """

    name: ClassVar[str] = "irs"

    def __init__(self, merge: bool = True, speed_tiers: bool = True) -> None:
        self.merge = merge
        self.speed_tiers = speed_tiers

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        remaining = job.remaining_rounds
        return math.inf if remaining is None else float(remaining * job.demand)

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        """With speed tiers on, the fastest waiting clients first (:func:`fastest_first`)."""
        return fastest_first(job) if self.speed_tiers and job.work_samples > 0 else None

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        by_class: dict[str, list[JobView]] = {}
        for job in jobs:
            by_class.setdefault(job.eligibility_key, []).append(job)
        if len(by_class) <= 1 and not self.speed_tiers:
            return list(jobs)
        queued = {key: len(members) for key, members in by_class.items()}
        supply = {key: ctx.supply_by_class.get(key, members[0].supply) for key, members in by_class.items()}
        ranked: list[JobView] = []
        for group in class_groups(queued, supply, self.merge):
            members = by_class[group[0]] if len(group) == 1 else [j for j in jobs if j.eligibility_key in group]
            if self.speed_tiers and self._pinned_elsewhere(members[0], ctx):
                members = members[1:]
            ranked.extend(members)
        return ranked

    def _pinned_elsewhere(self, head: JobView, ctx: SchedulingContext) -> bool:
        """True when ``head`` is pinned to the fastest tier of its class and this client is not in it."""
        return pinned(head, ctx) and not in_fastest_tier(head, ctx)

