"""Client check-in, offers and binding.

A check-in returns the open jobs the client is eligible for, in policy order; if there are none it
long-polls on :class:`WaitQueue` until a slot opens. Accept is one atomic Lua script that never binds
more clients than a round's target. Leases expire when a client stops heart-beating, which frees its
slot and wakes waiting clients to refill the round before its deadline.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from control_plane.errors import InvalidArgument, NotFound, PermissionDenied
from control_plane.events import Event, EventBus
from control_plane.hot_state import BindOutcome, HotState
from control_plane.jobs import JobRegistry
from control_plane.journal import Journal
from control_plane.metrics import Metrics
from control_plane.scheduling.rounds import retry_delay
from control_plane.scheduling.state import ActiveJob, RoundState
from control_plane.scheduling.wake import WakeLedger, WakeRule
from control_plane.waiters import WaitQueue
from policies import JobView
from propius.config import Settings
from propius.specs import AttributeValue, ClientProfile

__all__ = ["Binder", "CheckInResult", "Offer", "OfferSource"]


class OfferSource(Protocol):
    """What the binder needs of the scheduler (:class:`control_plane.scheduler.SchedulerView`)."""

    def on_event(self, event: Event) -> None:
        """Fold an event in; called before the binder wakes anyone for it."""

    def checked_in(self, client_id: str, now: float) -> None:
        """A client checked in (its sessions feed the policies' availability estimates)."""

    def offers_for(
        self, client_id: str, attributes: dict[str, AttributeValue], max_offers: int,
    ) -> list[tuple[JobView, RoundState]]:
        """The open rounds to offer the client, best first, with their states."""

    async def learned(self, job_id: str) -> None:
        """A job another shard registered was just loaded: re-read its round, which a refresh that began
        before the job was loaded may have dropped."""

    def wake_key(self, job_id: str) -> Callable[[str], float] | None:
        """The order in which to wake waiting clients for the job's round (lowest first); None: oldest first."""

    def open_slots(self, job_id: str, round_: int, attempt: int) -> int:
        """Free bind slots of the job's round attempt, as far as events told (0 once it is over)."""

    def passed_over(self, job_id: str, client_id: str) -> str | None:
        """The older job that FIFO would have given the client instead of ``job_id``, if any."""


@dataclass(frozen=True)
class Offer:
    offer_id: str
    job: ActiveJob
    state: RoundState
    expires_at: float


@dataclass(frozen=True)
class CheckInResult:
    client_id: str
    session_token: str
    offers: list[Offer]
    retry_after_s: float


def make_offer_id(job_id: str, round_: int, attempt: int, nonce: str | None = None) -> str:
    """``nonce``: random; one per check-in is enough, its offers differ by job (and an offer is only
    good with the session it was made in)."""
    return f"{job_id}.{round_}.{attempt}.{nonce or uuid.uuid4().hex}"


def parse_offer_id(offer_id: str) -> tuple[str, int, int]:
    try:
        job_id, round_, attempt, _ = offer_id.split(".")
        return job_id, int(round_), int(attempt)
    except ValueError:
        raise InvalidArgument("offer_id", "malformed offer id") from None


class Binder:
    def __init__(
        self, settings: Settings, hot: HotState, jobs: JobRegistry, scheduler: OfferSource, journal: Journal,
        bus: EventBus, metrics: Metrics,
    ) -> None:
        self._settings = settings
        self._hot = hot
        self._jobs = jobs
        self._scheduler = scheduler
        self._journal = journal
        self._bus = bus
        self._metrics = metrics
        self.waiting = WaitQueue(WakeRule(scan_floor=settings.wake_scan_floor))
        self._woken: WakeLedger[str, tuple[str, int, int]] = WakeLedger()  # attempt: (job, round, attempt)
        self._background: set[asyncio.Task[None]] = set()
        metrics.waiting.set_function(lambda: len(self.waiting))
        self._rng = random.Random()
        bus.add_listener(self._on_event)

    # ---------------------------------------------------------------- check-in

    async def check_in(self, profile: ClientProfile, wait_s: float, max_offers: int) -> CheckInResult:
        if not profile.client_id:
            profile = profile.model_copy(update={"client_id": uuid.uuid4().hex})
        max_offers = min(max_offers or self._settings.max_offers, self._settings.max_offers)
        attributes = profile.attributes()
        self._scheduler.checked_in(profile.client_id, time.time())
        self._settled(profile.client_id, None)  # back without the round it was woken for, if any
        offers = self._offers(profile.client_id, attributes, max_offers)
        wait_s = min(max(wait_s, 0.0), self._settings.max_wait_s)
        deadline = time.monotonic() + wait_s
        while not offers and (remaining := deadline - time.monotonic()) > 0:
            if not await self.waiting.wait(profile.client_id, attributes, remaining):
                break
            offers = self._offers(profile.client_id, attributes, max_offers)
        self._woken.offered(profile.client_id, (offer.job.job_id for offer in offers))
        token = await self._hot.check_in(
            profile, time.time(), self._session_ttl_s, [(offer.offer_id, offer.state) for offer in offers],
            self._settings.offer_ttl_s,
        )
        retry_after = 0.0 if offers else self._retry_after()
        self._metrics.check_ins.labels("offered" if offers else "none").inc()
        return CheckInResult(profile.client_id, token, offers, retry_after)

    def _offers(self, client_id: str, attributes: dict[str, AttributeValue], max_offers: int) -> list[Offer]:
        expires = time.time() + self._settings.offer_ttl_s
        nonce = uuid.uuid4().hex
        offers = []
        for view, state in self._scheduler.offers_for(client_id, attributes, max_offers):
            job = self._jobs.cached(view.job_id)
            if job is not None:
                offers.append(Offer(make_offer_id(job.job_id, state.round, state.attempt, nonce), job, state, expires))
        return offers

    def _retry_after(self) -> float:
        base = self._settings.max_wait_s if self._jobs.active() else 2 * self._settings.max_wait_s
        return retry_delay(base, self._rng)

    # ---------------------------------------------------------------- binding

    async def authenticate(self, client_id: str, token: str) -> None:
        if not client_id:
            raise InvalidArgument("client_id", "required")
        if not token or not await self._hot.session_valid(client_id, token):
            raise PermissionDenied(f"session of client {client_id!r} is not valid; check in again")

    async def accept(self, client_id: str, token: str, offer_id: str) -> tuple[str, int, int, BindOutcome]:
        """Bind to the offered round: (job_id, round, attempt, outcome). One Redis round trip."""
        job_id, round_, attempt = parse_offer_id(offer_id)
        if not client_id:
            raise InvalidArgument("client_id", "required")
        passed = self._scheduler.passed_over(job_id, client_id) or ""
        try:
            outcome = await self._hot.bind(job_id, offer_id, client_id, round_, attempt, self._settings.lease_s, token,
                                           origin=self._bus.id, passed_over=passed)
        except PermissionError:
            raise PermissionDenied(f"session of client {client_id!r} is not valid; check in again") from None
        if outcome.bound:
            self._journal.bound(job_id, round_, attempt, client_id)
            if outcome.event is not None:  # this shard's view learns its bind now, not when pub/sub delivers it
                self._bus.deliver(outcome.event)
            self._settled(client_id, (job_id, round_, attempt))
        self._metrics.accepts.labels(outcome.reason).inc()
        return job_id, round_, attempt, outcome

    @property
    def _session_ttl_s(self) -> float:
        """A session outlives its last check-in or heartbeat by this much: never less than a lease, so an
        upload that follows the last heartbeat within the lease finds its session."""
        return max(self._settings.client_ttl_s, self._settings.lease_s)

    async def heartbeat(self, client_id: str, token: str, job_id: str, round_: int) -> bool:
        """Extend the lease on the round (False: the client holds none) and the session with it."""
        await self.authenticate(client_id, token)
        state = await self._hot.round(job_id)
        if state is None or state.round != round_:
            return False
        return await self._hot.heartbeat(job_id, round_, state.attempt, client_id, self._settings.lease_s,
                                         self._session_ttl_s)

    async def release(self, client_id: str, token: str, job_id: str, round_: int) -> bool:
        await self.authenticate(client_id, token)
        state = await self._hot.round(job_id)
        if state is None or state.round != round_:
            return False
        freed, bound = await self._hot.unbind(job_id, round_, state.attempt, [client_id])
        if freed:
            self._journal.finished(job_id, round_, state.attempt, client_id, "released")
            await self._bus.publish(
                Event("client_released", job_id, round_, state.attempt, client_id, slots=1, bound=bound)
            )
        return bool(freed)

    async def reap_leases(self, now: float) -> int:
        """Free the slots of bound clients whose lease expired (dropouts), so the round can refill."""
        dropped = 0
        for job_id, state in (await self._hot.rounds([j.job_id for j in self._jobs.active()])).items():
            if state.state != "open":
                continue
            expired = await self._hot.expired_leases(job_id, state.round, state.attempt, now)
            if not expired:
                continue
            freed, bound = await self._hot.unbind(job_id, state.round, state.attempt, expired)
            dropped += len(freed)
            self._metrics.dropouts.inc(len(freed))
            for client_id in freed:  # one event each, naming the client (a job's server may track its clients)
                self._journal.finished(job_id, state.round, state.attempt, client_id, "dropped")
                await self._bus.publish(
                    Event("client_dropped", job_id, state.round, state.attempt, client_id, slots=1, bound=bound)
                )
        return dropped

    def _on_event(self, event: Event) -> None:
        self._scheduler.on_event(event)  # first: a client woken for this event must see what it changed
        if event.kind in ("round_closed", "round_failed"):
            self._woken.ended((event.job_id, event.round, event.attempt))
        elif event.kind in ("job_completed", "job_cancelled"):
            self._woken.job_done(event.job_id)
        if event.slots <= 0 or not self.waiting:  # nobody to wake: skip the wake order too
            return
        job = self._jobs.cached(event.job_id)
        if job is not None:
            self._wake(job, event.round, event.attempt, event.slots)
        else:  # a job registered on another shard: learn it from the store, then wake
            task = asyncio.create_task(self._learn_and_wake(event))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _learn_and_wake(self, event: Event) -> None:
        try:
            job = await self._jobs.get(event.job_id)
        except NotFound:
            return
        await self._scheduler.learned(job.job_id)
        self._wake(job, event.round, event.attempt, event.slots)

    def _wake(self, job: ActiveJob, round_: int, attempt: int, slots: int) -> None:
        """Wake waiters for ``slots`` of the round attempt, none it woke before (:class:`WakeLedger`)."""
        key = (job.job_id, round_, attempt)
        order = self._scheduler.wake_key(job.job_id)
        woken = self.waiting.wake(job.eligibility_key, job.spec.requirements.public, slots,
                                  None if order is None else self._woken.rank(job.job_id, order), self._woken.skip(key))
        self._woken.woke(job.job_id, key, woken)

    def _settled(self, client_id: str, took: tuple[str, int, int] | None) -> None:
        """A woken client checked in again or bound (to ``took``): if it left the round it was woken for with a
        free slot, the round wakes another waiter (the ledger tells lost races from declines:
        :meth:`WakeLedger.settled`)."""
        missed = self._woken.settled(client_id, took, lambda attempt: self._scheduler.open_slots(*attempt) > 0)
        job = None if missed is None else self._jobs.cached(missed[0])
        if job is not None and self.waiting:
            self._wake(job, missed[1], missed[2], 1)
