"""Least attained service first: the job that has received the least service so far is served first.

Attained service is ``rounds_done x demand``, the client-tasks a job has already consumed. Unlike
SRSF, LAS needs no knowledge of a job's length, so open-ended jobs compete on equal terms; it favours
new and small jobs, and a long job is served once it no longer leads in attained service. Ties fall
back to FIFO.
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, Policy, SchedulingContext

__all__ = ["LasPolicy"]


class LasPolicy(Policy):
    name: ClassVar[str] = "las"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return float(job.rounds_done * job.demand)
