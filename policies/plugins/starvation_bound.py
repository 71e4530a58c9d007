"""``starvation_bound`` (promote): no job is passed over forever; a job far behind its own pace goes first.

The sort order (smallest remaining service first) favours small jobs, so under a steady stream of them a
large job could wait for ever. As with the YARN fair scheduler's fair-share preemption timeout, a job
that has fallen too far behind is served first, whatever the sort says.

Its pace is its round's time limit (schedule + execution timeout, ``deadline_at - opened_at``), a
constant of the job's spec: a job's ``k``-th round (``k = rounds_done + 1``) is *due* at
``registered_at + slowdown x k x limit``. A job past its due time is promoted: ranked ahead of every job
that is not, among promoted jobs oldest registration first (FIFO), and offered to every client (no
speed-tier pin, ahead of any class group). Only while its class's recent clients could fill its round
(class supply at least its bind target): a job that too few clients can serve is starved by supply, not
by the order, and promoting it would only hold the clients its failing rounds bind (as FIFO's head of
line does), making the jobs behind it overdue in turn.

Why this bounds every job its class can serve, by construction: the due time is fixed by the spec and
the job's progress, so a job that makes no progress is promoted at a known time; from then on, until it
completes a round, it is passed over only by promoted jobs registered before it, as under FIFO, so a
stream of newer jobs cannot overtake it. ``slowdown`` is the bound (default 8, at least 1): no job is
served slower than one round per ``slowdown`` round limits on average, unless jobs registered before it
are too. The pace is deliberately not learned from the job's own round times: those stretch while it
starves, and failed rounds (timed as all scheduling) would make every job of an overloaded pool due at
once, which fails more rounds.
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.options import AtLeastOne
from policies.plugins.base import PromotePlugin
from policies.plugins.rounds import round_limit_s

__all__ = ["StarvationBound"]


class StarvationBound(PromotePlugin):
    name: ClassVar[str] = "starvation_bound"
    slowdown: AtLeastOne = 8.0

    def due_at(self, job: JobView) -> float | None:
        """When the job's current round is due; None when its round's time limit is not known."""
        limit = round_limit_s(job)
        return None if limit is None else job.registered_at + self.slowdown * (job.rounds_done + 1) * limit

    def promote(self, job: JobView, ctx: SchedulingContext) -> float | None:
        due = self.due_at(job)
        if due is None or ctx.now <= due or ctx.class_supply(job) < job.target:
            return None
        return job.registered_at
