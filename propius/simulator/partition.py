"""Static partitioning, the baseline that shares nothing: every client is pinned to one job for good.

Each job gets a quota of clients proportional to its bind target (``demand x over_selection``).
Jobs are filled from the most constrained (fewest eligible clients) to the least, each taking its
quota from the eligible, still unassigned clients in a seeded random order; clients left over go to
the eligible job with the smallest quota fill, so no eligible client is wasted at the start. A
client eligible for no job stays unassigned. When a job finishes, its clients idle: that is the
utilization a shared pool wins back.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from propius.simulator.engine import Simulation

__all__ = ["partition"]


def partition(sim: Simulation, seed: int) -> list[int]:
    """client -> pinned job index (-1: none), for a simulation built in static mode."""
    n = len(sim.population)
    jobs = sim.jobs
    eligible = [
        [c for c in range(n) if sim.class_mask[c] & job.class_bit and sim.private_ok(c, job)] for job in jobs
    ]
    weights = [job.spec.bind_target(job.spec.demand) for job in jobs]
    total = sum(weights)
    quota = [round(n * w / total) for w in weights]
    eligible_sets = [set(members) for members in eligible]
    pinned = [-1] * n
    taken = [0] * len(jobs)
    rng = random.Random(seed)
    for index in sorted(range(len(jobs)), key=lambda j: (len(eligible[j]), j)):
        candidates = [c for c in eligible[index] if pinned[c] < 0]
        rng.shuffle(candidates)
        for client in candidates[: quota[index]]:
            pinned[client] = index
            taken[index] += 1
    for client in range(n):
        if pinned[client] >= 0:
            continue
        options = [j for j in range(len(jobs)) if client in eligible_sets[j]]
        if options:
            best = min(options, key=lambda j: (taken[j] / quota[j] if quota[j] else float("inf"), j))
            pinned[client] = best
            taken[best] += 1
    return pinned
