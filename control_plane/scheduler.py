"""The scheduler loop (APScheduler): supply estimates, policy order, lease reaping, round deadlines.

Binding itself is event-driven (see :mod:`control_plane.binding`); this loop does the periodic work
that no single request triggers: estimating supply per eligibility class from recent check-ins of all
shards, freeing slots of clients that stopped heart-beating, closing rounds past their deadline and
flushing the durable journal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from control_plane.events import Event
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.observations import KEEP_S, LiveObservations
from control_plane.scheduling.fastest_fill import FillEstimates
from control_plane.scheduling.fifo_lag import passed_over
from control_plane.scheduling.matching import offer_candidates, ranked_offers, supply_by_class
from control_plane.scheduling.ordering import order_open_rounds
from control_plane.scheduling.state import ActiveJob, RoundState, job_view
from control_plane.scheduling.tiers import Cut
from control_plane.scheduling.wake import wake_order
from policies import JobView, Policy, SchedulingContext
from propius.config import Settings
from propius.specs import AttributeValue, ClientProfile

__all__ = ["Scheduler", "SchedulerView", "Snapshot"]

_SNAPSHOT_MAX_AGE_S = 0.05

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """Jobs with an open round, in policy order, with the round states they were built from."""

    views: list[JobView]
    states: dict[str, RoundState]
    ctx: SchedulingContext


class SchedulerView:
    """What check-ins read: the policy, supply estimates and an ordered view of open rounds.

    The binder asks it what :class:`~control_plane.binding.OfferSource` lists (offers, wake order, free
    slots, the job a bind passes over) and feeds it every event first (:meth:`on_event`), so a client woken
    by an event sees what it changed.

    Round states are cached in memory and kept current by events (which carry the new state or bound
    count) plus a full re-read every scheduler tick, so a check-in computes its offers without a Redis
    round trip. A slightly stale count only costs an Accept that answers round_full: binding itself is
    atomic in Redis.
    """

    def __init__(self, hot: HotState, jobs: JobRegistry, policy: Policy, settings: Settings, seed: int = 0) -> None:
        self._hot = hot
        self._jobs = jobs
        self.policy = policy
        self.observations = LiveObservations(jobs, settings.speed_tiers)
        self._session_gap_s = settings.client_ttl_s
        self._seed = seed
        self._supply: dict[str, int] = {}
        self._states: dict[str, RoundState] = {}
        self._changes: dict[str, int] = {}  # per job: events applied to the cache
        self._members: dict[str, tuple[int, int, set[str]]] = {}  # job -> (round, attempt, bound clients)
        self._eligible: dict[str, tuple[str, tuple[str, ...]]] = {}  # client -> (profile JSON, classes admitting it)
        self.estimates = 0  # supply estimates made: the recent clients change only with one
        self._classes_signature: tuple[str, ...] = ()
        self._version = 0  # bumped by every change a snapshot depends on
        self._snapshot: tuple[tuple[int, tuple[int, ...]], float, Snapshot] | None = None
        self._fill = FillEstimates(settings.fill_period_s)

    async def refresh_states(self, _now: float = 0.0) -> None:
        """Re-read every active job's round. A job's entry that an event changed while the read was in
        flight is newer than what the read returned, so it is kept (else a round that started during the
        read would vanish from the offers until the next tick, and the clients it woke would be gone)."""
        before = dict(self._changes)
        states = await self._hot.rounds([job.job_id for job in self._jobs.active()])
        for job_id, count in self._changes.items():
            if before.get(job_id) != count and job_id in self._states:
                states[job_id] = self._states[job_id]
        self._states = states
        self._version += 1

    async def learned(self, job_id: str) -> None:
        """A job another shard registered was just loaded (the binder learns it from its first event):
        re-read its round. A refresh that began before the job was loaded did not read it and dropped the
        state that event had set, so the clients woken for the round would have found no offer."""
        before = self._changes.get(job_id)
        state = (await self._hot.rounds([job_id])).get(job_id)
        job = self._jobs.cached(job_id)
        if (state is not None and job is not None and not job.finished
                and self._changes.get(job_id) == before):  # else an event since is newer
            self._changed(job_id)
            self._states[job_id] = state

    def on_event(self, event: Event) -> None:
        if self.observations.on_event(event):
            self._version += 1
        if event.state is not None:
            state = RoundState.from_hash(event.job_id, event.state)
            if state is not None:
                self._changed(event.job_id)
                self._states[event.job_id] = state
        elif event.bound >= 0:
            current = self._states.get(event.job_id)
            if current is not None and (current.round, current.attempt) == (event.round, event.attempt):
                self._changed(event.job_id)
                self._states[event.job_id] = replace(current, bound=event.bound)
        if event.kind == "client_bound":
            round_, attempt, members = self._members.get(event.job_id, (event.round, event.attempt, set()))
            if (round_, attempt) != (event.round, event.attempt):
                members = set()
            members.add(event.client_id)
            self._members[event.job_id] = (event.round, event.attempt, members)
        elif event.kind in ("job_completed", "job_cancelled"):
            self._states.pop(event.job_id, None)
            self._changes.pop(event.job_id, None)
            self._members.pop(event.job_id, None)
            self._fill.forget(event.job_id)
            self._version += 1

    # ---------------------------------------------------------------- what the binder asks

    def checked_in(self, client_id: str, now: float) -> None:
        self.observations.checked_in(client_id, now, self._session_gap_s)

    def offers_for(
        self, client_id: str, attributes: dict[str, AttributeValue], max_offers: int,
    ) -> list[tuple[JobView, RoundState]]:
        """Up to ``max_offers`` open rounds for the client, in the policy's order, with their states."""
        snap = self.snapshot()
        ctx = replace(snap.ctx, client=self.observations.estimate(client_id),
                      client_counted=client_id in self._eligible)  # counted by the last supply estimate
        chosen = offer_candidates(attributes, snap.views, self.policy, ctx, max_offers,
                                  joined=lambda view: self.bound_to(view.job_id, client_id))
        return [(view, snap.states[view.job_id]) for view in chosen]

    def wake_key(self, job_id: str) -> Callable[[str], float] | None:
        """The policy's wake order for the job's open round, over client ids; None: oldest first. A client the
        last supply estimate has not seen counts as needed by no narrower round."""
        views = self.snapshot().views
        view = next((view for view in views if view.job_id == job_id), None)
        score = None if view is None else self.policy.wake_key(view)
        if view is None or score is None:
            return None
        estimate = self.observations.estimate
        eligible = self._eligible

        def needed_by(classes: frozenset[str]) -> Callable[[str], bool]:
            return lambda client_id: not classes.isdisjoint(eligible.get(client_id, ("", ()))[1])

        return wake_order(lambda client_id: score(estimate(client_id)), view, lambda: views,
                          self.policy.wake_narrower_penalty, needed_by)

    def open_slots(self, job_id: str, round_: int, attempt: int) -> int:
        """Free bind slots of the job's round attempt, as far as events told (0 once it is over)."""
        state = self._states.get(job_id)
        if state is None or state.state != "open" or (state.round, state.attempt) != (round_, attempt):
            return 0
        return max(0, state.target - state.bound)

    def passed_over(self, job_id: str, client_id: str) -> str | None:
        """The older job that FIFO would have given the client instead of ``job_id``
        (:func:`~control_plane.scheduling.fifo_lag.passed_over`), among the rounds the policy would offer it
        now, by its profile as of the last supply estimate."""
        cached = self._eligible.get(client_id)
        if cached is None:
            return None
        snap = self.snapshot()
        ctx = replace(snap.ctx, client=self.observations.estimate(client_id))
        ranked = ranked_offers(ClientProfile.model_validate_json(cached[0]).attributes(), snap.views, self.policy,
                               ctx, joined=lambda view: self.bound_to(view.job_id, client_id))
        return passed_over(job_id, ranked, self.observations.short_under_fifo)

    def bound_to(self, job_id: str, client_id: str) -> bool:
        """Whether the client is already bound to the job's open round (as far as events told)."""
        state, known = self._states.get(job_id), self._members.get(job_id)
        return (state is not None and known is not None and known[:2] == (state.round, state.attempt)
                and client_id in known[2])

    @property
    def supply(self) -> dict[str, int]:
        """Recent clients per eligibility class (see :meth:`estimate_supply`)."""
        return self._supply

    @supply.setter
    def supply(self, value: dict[str, int]) -> None:
        self._supply = value
        self._version += 1

    def classes_of(self, client_id: str) -> tuple[str, ...]:
        """The eligibility classes admitting a recent client, as of the last supply estimate."""
        cached = self._eligible.get(client_id)
        return cached[1] if cached is not None else ()

    def recent_clients(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(client id, profile JSON, eligibility classes admitting it) of the recent clients, as of the last
        supply estimate; a copy, so a caller may yield to the event loop while it reads."""
        return [(client_id, raw, classes) for client_id, (raw, classes) in self._eligible.items()]

    def _changed(self, job_id: str) -> None:
        self._changes[job_id] = self._changes.get(job_id, 0) + 1
        self._version += 1

    def snapshot(self) -> Snapshot:
        """The ordered view; rebuilt when a round state, the active jobs or the supply changed (or after
        ``_SNAPSHOT_MAX_AGE_S``, for policies that age), else shared by the check-ins in between."""
        jobs = self._jobs.active()
        key = (self._version, tuple(map(id, jobs)))
        now = time.time()
        cached = self._snapshot
        if cached is not None and cached[0] == key and now - cached[1] < _SNAPSHOT_MAX_AGE_S:
            return cached[2]
        snapshot = self._build_snapshot(jobs, now)
        self._snapshot = (key, now, snapshot)
        return snapshot

    def _build_snapshot(self, jobs: list[ActiveJob], now: float) -> Snapshot:
        active = {job.job_id: job for job in jobs}
        states = {job_id: s for job_id, s in self._states.items() if s.state == "open" and job_id in active}
        views = []
        for job_id, state in states.items():
            job = active[job_id]
            views.append(self.observations.annotate(job_view(job, state, self.supply.get(job.eligibility_key, 0))))
        ctx = SchedulingContext(now=now, supply_by_class=dict(self.supply), seed=self._seed,
                                speed_tiers=self.observations.speed_tiers(),
                                class_speed_tiers=self.observations.class_speed_tiers())

        def fastest_fill(head: JobView) -> float | None:  # over the recent clients
            return self._fill.get(head.job_id, head.opened_at, now,
                                  lambda: self.observations.fastest_fill_at(head, views, self._eligible, now))

        return Snapshot(order_open_rounds(self.policy, views, ctx, fastest_fill), states, ctx)

    async def estimate_supply(self, window_s: float) -> dict[str, int]:
        """The scheduler's periodic re-estimate: forget the clients not seen within ``window_s`` (registry
        and observations), then count the recent ones per eligibility class and use that as the supply."""
        since = time.time() - window_s
        await self._hot.forget_clients_before(since)
        self.observations.forget_before(time.time() - KEEP_S)
        cut = self.observations.tiers.begin()  # the per-class speed tiers, over the same recent clients
        counts, self._eligible = await self._count(since, cut)  # clients no longer recent are forgotten
        self.observations.tiers.finish(cut)
        self.estimates += 1
        self.supply = counts
        return self.supply

    async def count_supply(self, window_s: float) -> dict[str, int]:
        """Clients seen within ``window_s`` per eligibility class; a read that changes no estimate."""
        counts, _ = await self._count(time.time() - window_s)
        return counts

    async def _count(
        self, since: float, cut: Cut | None = None,
    ) -> tuple[dict[str, int], dict[str, tuple[str, tuple[str, ...]]]]:
        """Recent clients per eligibility class, and what each recent client is eligible for (fed to ``cut``
        too, where given). Read and
        counted in slices, yielding to the event loop between them, and a client's parsed profile and
        eligibility are reused while its profile and the classes stay the same, so a large population
        does not stall check-ins."""
        classes = {job.eligibility_key: job.spec.requirements.public for job in self._jobs.active()}
        signature = tuple(sorted(classes))
        if signature != self._classes_signature:
            self._eligible.clear()
            self._classes_signature = signature
        counts = dict.fromkeys(classes, 0)
        seen: dict[str, tuple[str, tuple[str, ...]]] = {}
        async for rows in self._hot.recent_profiles_raw(since):
            for client_id, raw in rows:
                cached = self._eligible.get(client_id)
                if cached is None or cached[0] != raw:
                    try:
                        attributes = ClientProfile.model_validate_json(raw).attributes()
                    except ValueError:
                        continue
                    admitted = supply_by_class([attributes], classes)
                    cached = (raw, tuple(key for key, n in admitted.items() if n))
                seen[client_id] = cached
                for key in cached[1]:
                    counts[key] += 1
                if cut is not None:
                    cut.add(client_id, cached[1])
            await asyncio.sleep(0)
        return counts, seen


class Scheduler:
    """Runs the periodic tasks on an AsyncIOScheduler inside the control plane's event loop."""

    def __init__(self, settings: Settings, view: SchedulerView, jobs: JobRegistry) -> None:
        self._settings = settings
        self._view = view
        self._jobs = jobs
        self._scheduler = AsyncIOScheduler()
        self._tasks: list[Callable[[float], Awaitable[object]]] = []

    def every_tick(self, task: Callable[[float], Awaitable[object]]) -> None:
        self._tasks.append(task)

    async def tick(self) -> None:
        now = time.time()
        for task in self._tasks:
            try:
                await task(now)
            except Exception:  # noqa: BLE001 - one failing task must not stop the loop
                log.exception("scheduler task %s failed", getattr(task, "__qualname__", task))

    async def refresh(self) -> None:
        try:
            await self._jobs.refresh()
            await self._view.estimate_supply(self._settings.client_ttl_s)
        except Exception:  # noqa: BLE001
            log.exception("supply estimation failed")

    def start(self) -> None:
        period = self._settings.scheduler_period_s
        self._scheduler.add_job(self.tick, "interval", seconds=period, max_instances=1, coalesce=True)
        self._scheduler.add_job(self.refresh, "interval", seconds=max(period, self._settings.supply_period_s),
                                max_instances=1, coalesce=True)
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
