"""``doom_guard`` (offer): stop feeding a round that cannot reach ``demand`` in time.

Two tests, either of which keeps a client from the round (it stays free for a round that will complete):

- **Too few clients.** While the round is short of ``demand`` binds, its class has fewer recent clients
  than ``supply_floor`` (default 0.9) x ``demand``: it could close only if more than a tenth of the clients
  it needs came online before its deadline. It binds no one more until its class's supply is back; an attempt that
  reaches its deadline meanwhile fails and is re-run. Without this test such rounds held clients every
  other job could have used: on policy-20jobs (seed 2), 117 of the 146 failed attempts of the 400-client
  job opened with fewer than 400 of its class online. The floor is below 1 because clients do come during a
  round: FIFO closes rounds opened with 21-24 of the 25 clients they need online (family seed 2025, run seed
  0), and a floor of 1 held them, taking that job to 2.74x its FIFO JCT (docs/policies.md, "Rounds their
  class cannot fill"). A checking-in client the estimate has not counted yet (it came since) counts itself.
  Not judged: a round without a deadline, and a class the supply estimate counts no client of (none made
  yet, or made before any came: the checking-in client is one, so that estimate is stale). None turns this
  test off.
- **Too slow a bind rate.** Once the round has been open ``min_s`` seconds (default 60), its expected results
  plus what its bind rate so far would add before the deadline (less this client's task time) stay short of
  ``demand``; judged only while the job's class has fewer than ``spare_supply`` (default 1.5) times the round's
  slots of recent clients. In a class that holds the clients, a slow rate means they are working on other
  rounds, which release them when they close, often many at once; refusing them because the rate was slow kept
  it slow, attempt after attempt (family seed 10003, run seed 0: a 16-client job whose class had about 30
  online failed 32 attempts binding 0-3 clients each, 2.65x its FIFO JCT; docs/policies.md, "Rounds their
  class cannot fill"). None judges every round.

A client is held for another round, not for a class that is short: where the tests refuse every round offered to it
and the first for its class's supply, it binds to that round (``hold_alone`` False, the default). A class short of
clients stays short for the next attempts too, so the client would wait idle while they failed, where bound it may
complete a round with the clients that come online before the deadline (family seed 3038, run seed 0: six jobs of
5-7 clients share a class of about 18 online clients whose rounds fail most of the night under FIFO too; held, one
of them failed 120 attempts against FIFO's 80 and the run took 1.038x FIFO's average JCT, 0.916x bound;
docs/policies.md, "Rounds their class cannot fill"). A round refused for its bind rate alone still holds the client:
its class has the clients, and the round's next attempt may fill where this one was too slow (binding such clients
too, family seed 22000 of the sparse-arrival family, run seed 1, where a job is often the only one open, lost to
FIFO: 1.021x against 0.978x). True holds the client in both cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.options import AtLeastOne, NonNegative, Positive
from policies.plugins.base import OfferFilter
from policies.plugins.rounds import client_task_s, has_spare_supply

__all__ = ["DoomGuard"]


class DoomGuard(OfferFilter):
    name: ClassVar[str] = "doom_guard"
    min_s: NonNegative = 60.0
    supply_floor: Positive | None = 0.9
    spare_supply: AtLeastOne | None = 1.5
    hold_alone: bool = False

    def offers(self, ranked: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        kept = super().offers(ranked, ctx)
        if kept or self.hold_alone or not ranked or not self.too_few_clients(ranked[0], ctx):
            return kept
        return [ranked[0]]

    def keeps(self, job: JobView, ctx: SchedulingContext) -> bool:
        if job.opened_at is None or math.isinf(job.deadline_at):
            return True
        if self.too_few_clients(job, ctx):
            return False
        elapsed = ctx.now - job.opened_at
        if elapsed < self.min_s:
            return True
        if has_spare_supply(job, ctx, self.spare_supply):
            return True
        have = job.expected_results if job.expected_results is not None else float(job.bound)
        if have >= job.demand:
            return True
        left = max(0.0, job.deadline_at - ctx.now - (client_task_s(job, ctx) or 0.0))
        per_bind = have / job.bound if job.bound > 0 else 1.0
        return have + job.bound / elapsed * left * per_bind >= job.demand

    def too_few_clients(self, job: JobView, ctx: SchedulingContext) -> bool:
        """Whether the round, short of ``demand`` binds, has fewer recent clients in its class than
        ``supply_floor`` x ``demand``."""
        if self.supply_floor is None or job.bound >= job.demand:
            return False
        supply = ctx.supply_by_class.get(job.eligibility_key, 0)
        return supply > 0 and supply + (not ctx.client_counted) < self.supply_floor * job.demand
