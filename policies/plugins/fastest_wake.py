"""``fastest_wake`` (wake): a round's free slots wake the idle clients predicted to finish its task first.

The round closes at its ``demand``-th result, so binding the fastest idle clients shortens it (rather
than the longest waiting). The key is IRS's (:func:`policies.irs.fastest_first`): a client with no
history ranks at the bound of the job's fastest tier, after the clients known to be in it. A job whose
task shape is unknown wakes the oldest waiters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from policies.base import ClientEstimate, JobView
from policies.irs import fastest_first
from policies.plugins.base import WakePlugin

__all__ = ["FastestWake"]


class FastestWake(WakePlugin):
    name: ClassVar[str] = "fastest_wake"

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        return fastest_first(job) if job.work_samples > 0 else None
