"""Random order: the original Propius "random" policy, made reproducible.

Each job gets a fixed pseudo-random rank: the first 8 bytes of ``sha256(f"{seed}:{job_id}")`` read as
a fraction in [0, 1). The rank depends on nothing but ``(ctx.seed, job_id)``: not on arrival order,
on the other jobs, or on the process (unlike ``hash()``, which Python salts per process). So a job
keeps its place from one scheduler period to the next and across control-plane restarts, and a new
job slots in without reshuffling the others. A different ``seed`` draws a different order.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

from policies.base import JobView, Policy, SchedulingContext

__all__ = ["RandomOrderPolicy", "job_rank"]


def job_rank(seed: int, job_id: str) -> float:
    """The job's stable pseudo-random rank in [0, 1)."""
    digest = hashlib.sha256(f"{seed}:{job_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class RandomOrderPolicy(Policy):
    name: ClassVar[str] = "random"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return job_rank(ctx.seed, job.job_id)
