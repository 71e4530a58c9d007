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

The simulator and the live control plane (``control_plane.scheduler``) compute it with this one
function, for the head of the policy order only: the head job is every eligible client's first offer,
so a busy client freeing up does come to it; for a job further down it would go elsewhere, and
waiting for it would only starve the job (measured: docs/policies.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

__all__ = ["FILL_PERIOD_S", "fastest_fill_at"]

FILL_PERIOD_S = 5.0  # how often the scheduler re-estimates it for an open round (a pass over clients)


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
