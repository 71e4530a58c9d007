"""When could a round have its results if the fastest eligible clients served it? (``JobView.fastest_fill_at``)

A round that takes whichever idle client checks in first closes at the ``demand``-th delivery of a
mixed lot, slow clients included. But a fast client busy with another job's task is often free again
within seconds, and would deliver this round's task long before a slow idle client: waiting for it
closes the round earlier, and the slow client does another job's work meanwhile. This is the
speed-homogeneous pairing that the clairvoyant LP of ``benchmarks/utilization_bound.py`` uses to
reach its bound (the critical job on the fastest clients, the others on the rest).

The estimate counts the round's own working clients from their bind, and the clients that delivered
to the job before (the only ones its private constraints, checked on the device, are known to admit)
and are not yet in this round attempt: those working for another job from the predicted end of that
task, idle ones from now; each then needs its predicted task time for this job. The round's open
result slots (its bind target less the results in) are filled by the earliest of those deliveries; the
last of them is the estimate. Clients with unknown task times are not counted (so the estimate can
only be late, never exclude a client on a guess), and with too few known clients there is none.

The simulator and the live control plane compute it with :func:`estimate_fastest_fill`, for the
head of the policy order only (:mod:`control_plane.scheduling.ordering`): the head job is every
eligible client's first offer, so a busy client freeing up does come to it; for a job further down it
would go elsewhere, and waiting for it would only starve the job (docs/policies.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Hashable, Iterable

from control_plane.scheduling.attempts import Attempt
from policies import ClientEstimate, JobView

__all__ = ["FillEstimates", "estimate_fastest_fill", "fastest_fill_at"]


def fastest_fill_at(
    now: float, slots: int, members: Iterable[tuple[float, float | None]],
    busy: Iterable[tuple[float, float | None]], idle: Iterable[float | None],
) -> float | None:
    """The ``slots``-th earliest predicted delivery, or None with fewer known clients than ``slots``.

    ``members``: (bind time, task seconds) of the round's working clients; ``busy``: (predicted end
    of the current task, task seconds for this job) of eligible clients working for another job;
    ``idle``: task seconds for this job of eligible idle clients. None task seconds: unknown.
    """
    if slots <= 0:
        return None
    deliveries = [bound_at + task_s for bound_at, task_s in members if task_s is not None]
    deliveries += [max(now, free_at) + task_s for free_at, task_s in busy if task_s is not None]
    deliveries += [now + task_s for task_s in idle if task_s is not None]
    if len(deliveries) < slots:
        return None
    return heapq.nsmallest(slots, deliveries)[-1]


def estimate_fastest_fill(
    head: JobView, attempt: Attempt, others: Iterable[tuple[JobView, Attempt]], served: Container[Hashable],
    idle: Iterable[Hashable], estimate: Callable[[Hashable], ClientEstimate], now: float,
) -> float | None:
    """``head.fastest_fill_at`` from the learned estimates.

    ``attempt``: the head's open attempt; ``others``: the other open rounds (their views, for their
    task shapes, and attempts); ``served``: the clients that delivered to the head's job before;
    ``idle``: online clients bound to no round (those not in ``served`` or already in ``attempt`` are
    left out here).
    """
    def candidate(client: Hashable) -> bool:
        return client in served and client not in attempt.joined

    busy = []
    for view, other in others:
        for client, (bound_at, _) in other.members.items():
            if candidate(client):
                learned = estimate(client)
                if (current_s := learned.task_s(view)) is not None:
                    busy.append((bound_at + current_s, learned.task_s(head)))
    members = ((bound_at, estimate(client).task_s(head)) for client, (bound_at, _) in attempt.members.items())
    idle_s = (estimate(client).task_s(head) for client in idle if candidate(client))
    return fastest_fill_at(now, head.target - head.results, members, busy, idle_s)


class FillEstimates:
    """The estimate per job, recomputed for its open round at most every ``period_s`` (a pass over clients)."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._cached: dict[Hashable, tuple[Hashable, float, float | None]] = {}  # job -> (round, at, value)

    def get(self, job: Hashable, round_key: Hashable, now: float, compute: Callable[[], float | None]) -> float | None:
        cached = self._cached.get(job)
        if cached is not None and cached[0] == round_key and now - cached[1] < self.period_s:
            return cached[2]
        value = compute()
        self._cached[job] = (round_key, now, value)
        return value

    def forget(self, job: Hashable) -> None:
        self._cached.pop(job, None)
