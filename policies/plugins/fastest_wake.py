"""``fastest_wake`` (wake): a round's free slots wake the idle clients predicted to finish its task first.

The round closes at its ``demand``-th result, so binding the fastest idle clients shortens it (rather
than the longest waiting). The key is IRS's (:func:`policies.irs.fastest_first`): a client with no
history ranks at the bound of the job's fastest tier, after the clients known to be in it; but never before
what it is known to need at least (:meth:`~policies.base.ClientEstimate.task_floor_s`: a client still working
on such a task when a round ended), or a straggler that never delivers would rank with the fastest for ever.
A job whose task shape is unknown wakes the oldest waiters.

A waiter that an open round of a smaller eligibility class still needs counts ``narrower_penalty`` times
slower (default 1.5; 1 turns it off): every job wants the fastest phones, and where classes overlap, a broad
class's fastest are often the few a narrow class has. Without it, a broad round's wakes took a narrow
round's fast clients that FIFO's oldest-first wakes had left it (family seed 18, run seed 1: a 24-client job
of a class of 18 % of the phones took 2.67x its FIFO JCT; 1.00x with it). Ranking them after every other
waiter instead woke a broad round's slowest phones, whose tasks outlast the round (family seed 2021: two
8-client jobs of the superset class at 1.9x and 2.07x).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from policies.base import ClientEstimate, JobView
from policies.irs import fastest_first
from policies.options import AtLeastOne
from policies.plugins.base import WakePlugin

__all__ = ["FastestWake"]


class FastestWake(WakePlugin):
    name: ClassVar[str] = "fastest_wake"
    narrower_penalty: AtLeastOne = 1.5

    @property
    def wake_narrower_penalty(self) -> float:
        return self.narrower_penalty

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        return fastest_first(job, floors=True) if job.work_samples > 0 else None
