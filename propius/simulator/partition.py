"""Static partitioning, the baseline that shares nothing: every client is pinned to one job for good.

Each job has a quota proportional to its bind target (``demand x over_selection``). Clients are
assigned least flexible first (those eligible for the fewest jobs, ties in a seeded random order),
each to an eligible job still short of its ``demand`` if there is one, else to the eligible job whose
quota is least filled, so a strict job is not left without the few clients that can serve it. Where
the pool cannot give every job ``demand`` distinct clients, a short job never completes a round: that
is a property of static partitioning, reported as unfinished jobs. A client eligible for no job
stays unassigned. When a job finishes, its clients idle: that is the utilization a shared pool wins back.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from propius.simulator.jobs import SimJob

__all__ = ["partition"]


def partition(
    jobs: Sequence[SimJob], class_mask: Sequence[int], private_ok: Callable[[int, SimJob], bool], seed: int,
) -> list[int]:
    """client -> pinned job index (-1: none); ``class_mask``: each client's eligibility classes as bits,
    ``private_ok``: whether a job's private constraints admit a client."""
    quota = [job.spec.bind_target(job.spec.demand) for job in jobs]
    demand = [job.spec.demand for job in jobs]
    options = [
        [job.index for job in jobs if mask & job.class_bit and private_ok(c, job)]
        for c, mask in enumerate(class_mask)
    ]
    order = list(range(len(options)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda c: len(options[c]))
    pinned = [-1] * len(options)
    taken = [0] * len(jobs)
    for client in order:
        if options[client]:
            best = min(options[client], key=lambda j: (taken[j] >= demand[j], taken[j] / quota[j], j))
            pinned[client] = best
            taken[best] += 1
    return pinned
