"""First in, first out: jobs are served in registration order."""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, Policy, SchedulingContext

__all__ = ["FifoPolicy"]


class FifoPolicy(Policy):
    name: ClassVar[str] = "fifo"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return job.registered_at
