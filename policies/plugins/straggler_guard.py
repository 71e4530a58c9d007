"""``straggler_guard`` (offer): no bind predicted to deliver after the round's expected close, where the round
can do without it.

Once a round holds ``demand`` clients, a further client is bound only if it is predicted to deliver
before the round's expected close: open time + recent scheduling delay + (1 + ``slack``) x recent
response time (``slack`` default 0.2, > -1). A later result would be thrown away, but only if the round
does close with the others' results, so it is refused only while the round expects at least
``demand + margin`` results without it (``margin`` default 1, >= 0; ``JobView.expected_results``: results in
plus the working clients' reliabilities; not known: not refused; None: no such check, as in the ``makespan``
profile). Without that check, a round of slow clients that drop refuses the late ones its over-selection is
for, and can fail at its deadline a result or two short, attempt after attempt (family seed 22000 of the
sparse-arrival family, run seed 0: a 12-client job of the slowest class failed 35 attempts against FIFO's 1,
the run 1.195x FIFO; at ``margin`` 1, 0.965x; docs/policies.md, "Known stragglers").

Before that, a client is refused only on what it is known to need at least
(:meth:`~policies.base.ClientEstimate.task_floor_s`: it was still working on such a task when a round ended),
and only while the job's class has ``spare_supply`` (default 2) times the round's slots of recent clients.
Without it, a round released its stragglers at its close and they bound again at once to the job's next round,
round after round: a client that never delivers stays of unknown speed, so nothing else keeps it away, and
each one takes a slot that a client able to finish would fill (family seed 3013, run seed 1: a 10-client job
whose rounds take about 60 s under FIFO rebound a phone whose task takes 253 s to four rounds in a row;
docs/policies.md, "Known stragglers").
In a class barely larger than the round the round needs them all, and refusing one fails the round; None
turns this part off.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import JobView, SchedulingContext
from policies.options import AtLeastOne
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s, expected_close, has_spare_supply

__all__ = ["StragglerGuard"]


class StragglerGuard(OfferFilter):
    name: ClassVar[str] = "straggler_guard"
    slack: Annotated[float, Field(gt=-1.0)] = 0.2
    spare_supply: AtLeastOne | None = 2.0
    margin: Annotated[float, Field(ge=0.0)] | None = 1.0

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        if job.bound >= job.demand:
            expected = job.expected_results
            if self.margin is not None and (expected is None or expected < job.demand + self.margin):
                return True  # the round may need this client's result, late or not (or nothing says it will not)
            task_s = client_task_s(job, ctx)
        elif ctx.client is not None and has_spare_supply(job, ctx, self.spare_supply):
            task_s = ctx.client.task_floor_s(job)
        else:
            return True
        if task_s is None:
            return True
        closes_at = expected_close(job, response_factor=1.0 + self.slack)
        return closes_at is None or ctx.now + task_s <= closes_at
