"""``fastest_wake`` (wake): a round's free slots wake the idle clients predicted to finish its task first.

The round closes at its ``demand``-th result, so binding the fastest idle clients shortens it (rather
than the longest waiting). A client with no history counts as fastest, so it is tried and measured; a
job whose task shape is unknown wakes the oldest waiters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from policies.base import ClientEstimate, JobView
from policies.plugins.base import WakePlugin

__all__ = ["FastestWake"]


class FastestWake(WakePlugin):
    name: ClassVar[str] = "fastest_wake"

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        if job.work_samples <= 0:
            return None

        def predicted_task_s(client: ClientEstimate) -> float:
            task_s = client.task_s(job)
            return 0.0 if task_s is None else task_s

        return predicted_task_s
