"""``propius``, the default policy: smallest remaining service first, with informed, waste-avoiding dispatch.

It reuses IRS's machinery (:mod:`policies.irs`: the SRSF score, the class groups, speed-tier pinning)
but asks, for every bind, whether the bind will pay off. A bind that does not deliver a counted result
costs twice: the client is blocked for nothing, and when the jobs ahead open their next round that
client is busy elsewhere. Most time lost under IRS is failed round attempts of jobs low in the order
that received a trickle of clients; and IRS's scarce-class-first order lets strict classes' large jobs
overtake small jobs of looser classes. Every rule is an option, so the benchmark can show what each
buys (docs/policies.md has the measurements):

- ``scarce_first`` (off): IRS's class order, scarcest eligibility class first, with the contention-aware
  ``merge``. Off, the jobs a client is eligible for are offered in one global smallest-remaining-service
  order (IRS's ``score``), whatever their class.
- ``speed_tiers`` (on, from IRS): pin the head job (of each class group, or of the global order) to the
  fastest learned speed tier when its response collection dominates its scheduling delay.
- ``task_tiers`` (on): the fastest tier is the fastest third of clients by predicted task time for the
  pinned job (training, download and upload), not by training speed alone as in IRS: a fast phone on a
  slow link would be the round's straggler.
- ``tier_fit`` (on): pin only a job whose class supply is at least ``tiers x`` its bind target, i.e. whose
  round the fastest tier can fill; pinning a job that needs most of its class to one tier of it only
  stretches its scheduling delay.
- ``deadline_aware`` (on): no bind predicted (from the client's learned speed and bandwidth) to finish
  after the round's deadline; it would only ever be a straggler.
- ``availability_aware`` (on): no bind of a client whose online period is predicted (from its learned
  typical length) to end before the task would.
- ``doom_guard`` (on): once a round has been open ``doom_min_s`` seconds, stop feeding it when, at the rate
  it has bound clients so far, it cannot reach ``demand`` results before its deadline; the client stays
  free for a round that will complete (the doomed round fails without holding anyone and is re-run).
- ``straggler_guard`` (on): once a round holds ``demand`` clients, bind a further (over-selected) client
  only if it is predicted to deliver before the round's expected close (its recent scheduling delay plus
  ``1 + straggler_slack`` times its recent response time after opening); a later result is thrown away.
- ``fastest_wake`` (on): the idle clients a round's free slots wake are those predicted to finish its task
  first, not the longest waiting: the round closes at its ``demand``-th result, so binding the fastest
  idle clients shortens it. A client with no history ranks at the bound of the fastest tier
  (:func:`policies.irs.fastest_first`).
- ``longest_first`` (off): a makespan objective instead of JCT, for a batch of jobs that must all finish:
  the job with the longest predicted remaining time (remaining rounds x its recent scheduling delay plus
  response time) first, as in longest-processing-time-first list scheduling; a job whose rounds have not
  been timed yet goes first, so it is measured. Small jobs wait, hence off by default.
- ``wait_for_faster`` (off; part of the makespan objective): the head job of the order refuses a client
  predicted to deliver after the time its round could have all its results from the fastest eligible
  clients, counting those busy elsewhere from when they free up (``JobView.fastest_fill_at``): the slow
  idle client serves another job, the round waits seconds for a fast one.
- ``hold_for_tight`` (off; part of the makespan objective): a job is tight when its round needs at least
  ``tight_fraction`` of its class's clients (``demand >= tight_fraction x supply``). A client is not offered
  a job ranked after a tight one if its task there would outlast the tight job's expected next opening
  (open time + recent scheduling delay + recent response time) by more than ``hold_slack`` x its response
  time; it waits for the tight job instead. The tight round counts while it has free slots, also for a
  client that already served it.
- ``admission`` (off): jobs are admitted in priority order while they fit. A job fits when the bind
  targets of the admitted jobs that draw on no more clients than it (supply at most its own), its own
  included, add up to at most ``admission_load x`` its class's supply (Hall's condition on a chain of
  nested classes). The first job is always admitted.
- ``adaptive_over_selection`` (off): stop offering a round once its expected results (results plus each
  working client weighted by its learned reliability) reach ``demand + margin_z x sqrt(demand)``.
- ``aging_tau_s`` (0 = off): starvation guard; the score is divided by ``1 + age / aging_tau_s``.
- ``fill_first`` (off): inside a class group (the whole order when ``scarce_first`` is off), offer rounds
  that already hold some clients before empty ones.

Unknown estimates never exclude anyone: a client without history, or a snapshot without the optional
fields, gets the plain order (SRSF with the eligibility filter) without the rules that need them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, ClassVar

from pydantic import Field

from policies.base import ClientEstimate, JobView, SchedulingContext
from policies.irs import IrsPolicy, fastest_first
from policies.options import Fraction, NonNegative, Positive
from propius.specs import AttributeValue

__all__ = ["PropiusPolicy", "admitted"]


def admitted(ordered: Sequence[JobView], supply: Mapping[str, int], load: float) -> list[JobView]:
    """The prefix-feasible subset of ``ordered`` (see the module docstring); the first always fits."""
    kept: list[tuple[int, int]] = []  # (class supply, target) of admitted jobs
    result: list[JobView] = []
    for job in ordered:
        own = supply.get(job.eligibility_key, job.supply)
        need = job.target + sum(target for s, target in kept if s <= own)
        if not result or need <= load * own:
            kept.append((own, job.target))
            result.append(job)
    return result


class PropiusPolicy(IrsPolicy):
    """The default policy; each parameter switches or tunes one rule of the module docstring.

    Parameters
    ----------
    merge, speed_tiers : bool, default True
        As in :class:`~policies.irs.IrsPolicy`.
    scarce_first : bool, default False
        IRS's scarcest-class-first order instead of one global SRSF order.
    task_tiers, tier_fit : bool, default True
        Speed tiers by predicted task time; pin only a job the fastest tier can fill.
    deadline_aware, availability_aware : bool, default True
        No bind predicted to finish after the round's deadline, or after the client goes offline.
    doom_guard : bool, default True
        Stop feeding a round that cannot reach ``demand`` in time; ``doom_min_s`` (default 60) after it opened.
    straggler_guard : bool, default True
        No over-selected bind predicted to deliver after the round's expected close, with
        ``straggler_slack`` (default 0.2, > -1) times the recent response time of slack.
    fastest_wake : bool, default True
        Free slots wake the waiting clients predicted to finish first.
    longest_first, wait_for_faster, hold_for_tight : bool, default False
        The makespan objective's rules; ``hold_for_tight`` is tuned by ``tight_fraction`` (in (0, 1],
        default 0.75) and ``hold_slack`` (>= 0, default 0.5).
    admission : bool, default False
        Admit jobs while they fit ``admission_load`` (> 0, default 1.0) times their class's supply.
    adaptive_over_selection : bool, default False
        Stop offering a round at ``demand + margin_z x sqrt(demand)`` expected results (``margin_z`` >= 0,
        default 1.0).
    aging_tau_s : float, default 0.0
        Starvation guard; 0 is off.
    fill_first : bool, default False
        Offer rounds that already hold clients before empty ones.
    """

    name: ClassVar[str] = "propius"

    def __init__(
        self, merge: bool = True, speed_tiers: bool = True, admission: bool = False, admission_load: Positive = 1.0,
        deadline_aware: bool = True, availability_aware: bool = True, adaptive_over_selection: bool = False,
        margin_z: NonNegative = 1.0, aging_tau_s: NonNegative = 0.0, fill_first: bool = False,
        scarce_first: bool = False, doom_guard: bool = True, doom_min_s: NonNegative = 60.0,
        straggler_guard: bool = True, straggler_slack: Annotated[float, Field(gt=-1.0)] = 0.2,
        tier_fit: bool = True, task_tiers: bool = True,
        longest_first: bool = False, fastest_wake: bool = True, wait_for_faster: bool = False,
        hold_for_tight: bool = False, tight_fraction: Fraction = 0.75, hold_slack: NonNegative = 0.5,
    ) -> None:
        super().__init__(merge=merge, speed_tiers=speed_tiers)
        self.admission = admission
        self.admission_load = admission_load
        self.deadline_aware = deadline_aware
        self.availability_aware = availability_aware
        self.adaptive_over_selection = adaptive_over_selection
        self.margin_z = margin_z
        self.aging_tau_s = aging_tau_s
        self.fill_first = fill_first
        self.scarce_first = scarce_first
        self.doom_guard = doom_guard
        self.doom_min_s = doom_min_s
        self.straggler_guard = straggler_guard
        self.straggler_slack = straggler_slack
        self.tier_fit = tier_fit
        self.task_tiers = task_tiers
        self.longest_first = longest_first
        self.fastest_wake = fastest_wake
        self.wait_for_faster = wait_for_faster
        self.hold_for_tight = hold_for_tight
        self.tight_fraction = tight_fraction
        self.hold_slack = hold_slack

    @property
    def wants_fastest_fill(self) -> bool:
        return self.wait_for_faster

    @property
    def _reorders_groups(self) -> bool:  # type: ignore[override]
        return self.fill_first

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        if self.longest_first:
            return -self._remaining_s(job)
        base = super().score(job, ctx)
        if self.aging_tau_s <= 0 or math.isinf(base):
            return base
        return base / (1.0 + max(0.0, ctx.now - job.registered_at) / self.aging_tau_s)

    @staticmethod
    def _remaining_s(job: JobView) -> float:
        """Predicted seconds until ``job`` finishes if served as it was recently; inf when not yet timed."""
        if job.recent_schedule_s is None or job.recent_response_s is None or job.remaining_rounds is None:
            return math.inf
        return job.remaining_rounds * (job.recent_schedule_s + job.recent_response_s)

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        return fastest_first(job) if self.fastest_wake and job.work_samples > 0 else None

    def _order_group(self, members: list[JobView], ctx: SchedulingContext) -> list[JobView]:
        if not self.fill_first:
            return members
        started = [job for job in members if 0 < job.bound < job.target]
        return started + [job for job in members if not 0 < job.bound < job.target]

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        ordered = super().order(jobs, ctx)
        return admitted(ordered, ctx.supply_by_class, self.admission_load) if self.admission else ordered

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        if self.scarce_first:
            ranked = super().rank_for_client(attributes, jobs, ctx)
        else:
            ranked = list(jobs)
            if self.speed_tiers and ranked and self._pinned_elsewhere(ranked[0], ctx):
                ranked = ranked[1:]
            ranked = self._order_group(ranked, ctx)
        if self.hold_for_tight:
            ranked = self._not_delaying_tight(ranked, ctx)
        return [job for job in ranked if self._worth_binding(job, ctx.client, ctx.now)
                and not (self.doom_guard and self._doomed(job, ctx.client, ctx.now))]

    def _not_delaying_tight(self, ranked: list[JobView], ctx: SchedulingContext) -> list[JobView]:
        """``ranked`` without the jobs whose task would keep this client busy past the hold of a tight
        job ranked before them (``_hold_until``)."""
        if ctx.client is None:
            return ranked
        kept: list[JobView] = []
        hold_until = math.inf
        for job in ranked:
            task_s = ctx.client.task_s(job)
            if task_s is None or ctx.now + task_s <= hold_until:
                kept.append(job)
            hold_until = min(hold_until, self._hold_until(job, ctx))
        return kept

    def _hold_until(self, job: JobView, ctx: SchedulingContext) -> float:
        """For a tight job whose rounds have been timed: its expected next opening (open time + recent
        scheduling delay + recent response time, or now if overdue) + ``hold_slack`` x its response
        time. inf otherwise."""
        supply = ctx.class_supply(job)
        if supply <= 0 or job.demand < self.tight_fraction * supply:
            return math.inf
        closes_at = self._expected_close(job)
        if closes_at is None or job.recent_response_s is None:
            return math.inf
        return max(closes_at, ctx.now) + self.hold_slack * job.recent_response_s

    def _tier_fits(self, head: JobView, ctx: SchedulingContext, k: int) -> bool:
        return not self.tier_fit or super()._tier_fits(head, ctx, k)

    def _in_fastest_tier(self, head: JobView, ctx: SchedulingContext) -> bool:
        if not self.task_tiers or head.fast_task_s is None:
            return super()._in_fastest_tier(head, ctx)
        task_s = ctx.client.task_s(head) if ctx.client is not None else None
        return task_s is None or task_s <= head.fast_task_s  # unknown: tried, as in IRS

    def _late(self, job: JobView, finish_at: float) -> bool:
        """True when the round already holds ``demand`` clients and is expected to close before ``finish_at``.

        Expected close: open time + the job's recent scheduling delay + (1 + slack) x its recent
        response-collection time.
        """
        if job.bound < job.demand:
            return False
        closes_at = self._expected_close(job, response_factor=1.0 + self.straggler_slack)
        return closes_at is not None and finish_at > closes_at

    @staticmethod
    def _expected_close(job: JobView, response_factor: float = 1.0) -> float | None:
        """Open time + recent scheduling delay + ``response_factor`` x recent response time; None untimed."""
        if job.opened_at is None or job.recent_schedule_s is None or job.recent_response_s is None:
            return None
        return job.opened_at + job.recent_schedule_s + response_factor * job.recent_response_s

    def _doomed(self, job: JobView, client: ClientEstimate | None, now: float) -> bool:
        """True when the round, at the rate it has been binding clients, cannot reach ``demand`` in time."""
        if job.opened_at is None or math.isinf(job.deadline_at):
            return False
        elapsed = now - job.opened_at
        if elapsed < self.doom_min_s:
            return False
        have = job.expected_results if job.expected_results is not None else float(job.bound)
        if have >= job.demand:
            return False
        task_s = client.task_s(job) if client is not None else None
        left = max(0.0, job.deadline_at - now - (task_s or 0.0))
        per_bind = have / job.bound if job.bound > 0 else 1.0
        return have + job.bound / elapsed * left * per_bind < job.demand

    def _worth_binding(self, job: JobView, client: ClientEstimate | None, now: float) -> bool:
        if self.adaptive_over_selection and self._satisfied(job):
            return False
        task_s = client.task_s(job) if client is not None else None
        if task_s is None:
            return True
        if self.deadline_aware and now + task_s > min(job.deadline_at, now + job.execution_timeout_s):
            return False
        if self.straggler_guard and self._late(job, now + task_s):
            return False
        if self.wait_for_faster and job.fastest_fill_at is not None and now + task_s > job.fastest_fill_at:
            return False
        if self.availability_aware:
            available_s = client.available_for_s(now)
            if available_s is not None and 0 < available_s < task_s:  # <= 0: the prediction already failed
                return False
        return True

    def _satisfied(self, job: JobView) -> bool:
        if job.expected_results is None:
            return False
        return job.expected_results >= job.demand + self.margin_z * math.sqrt(job.demand)
