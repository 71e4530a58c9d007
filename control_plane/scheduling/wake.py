"""Which waiting clients a freed or new slot wakes.

A check-in that finds no offer waits (the live :class:`control_plane.waiters.WaitQueue`, the
simulator's :class:`propius.simulator.waitpool.WaitPool`) instead of polling. A slot wakes a few more
clients than it has room for, because some decline (private constraints, checked on the device) or
lose the race to bind: the oldest eligible waiters or, when the policy has a wake key
(:meth:`policies.Policy.wake_key`, e.g. the predicted fastest), the lowest keys among a bounded number
of the oldest, so the cost of a wake stays bounded however many wait.

A keyed wake ranks at least ``scan_floor`` waiters however few slots it fills. With only ``scan x budget``,
a large round's wake (a 186-client round: the 2,976 oldest) took the fastest of most of an always-online
pool, and the small rounds woken after it ranked only the 16 per slot at the head of the queue, the slow
clients it had left: family seed 7015 (always online, run seed 1), the default's 6-client job got tasks of
102 s on average against FIFO's 80 s, and the run took 1.109x FIFO's average JCT.

A woken client need not take the slot it was woken for: it may decline the job (private requirements
are checked on the device), take another job's round first, or find the slot filled. Its slot would then
stay free until some other event wakes someone, and with a wake key the next wake picks the same fast
decliners again, so a round can fail attempt after attempt with eligible clients asleep.
:class:`WakeLedger` remembers which clients each round attempt woke: when a woken client settles without
taking that attempt, the attempt wakes one more, never a client it woke before, except one that found no free
slot or took another round (:meth:`WakeLedger.settled`): that one did not refuse the job. And the job's later keyed
wakes rank such a decliner last (:meth:`WakeLedger.rank`): a device whose private requirements refuse the
job refuses every round of it. Without that, once a wake ranked 1,024 waiters, the same fast decliners
were woken for every attempt of a job whose few acceptors were slow, the attempt's failed clients took its
slots again, and the job failed 1,952 attempts in a row (family seed 7034, always online, run seed 0).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Generic, TypeVar

from policies import JobView

__all__ = ["WakeLedger", "WakeRule", "narrower_classes", "sparing_narrower", "wake_order"]

W = TypeVar("W")
C = TypeVar("C", bound=Hashable)
A = TypeVar("A", bound=Hashable)


@dataclass(frozen=True)
class WakeRule:
    overwake: float = 2.0  # waiters woken per free slot
    scan: int = 8  # a keyed wake ranks the scan x budget oldest eligible waiters,
    scan_floor: int = 4096  # and at least this many: the cost of a wake stays bounded

    def budget(self, slots: int) -> int:
        """Waiters to wake for ``slots`` free slots: ``overwake`` each, at least one."""
        return max(1, int(slots * self.overwake)) if slots > 0 else 0

    def looks_at(self, slots: int, keyed: bool) -> int:
        """How many of the oldest eligible waiters a wake of ``slots`` considers: ``budget``, or with a key
        ``max(scan x budget, scan_floor)``."""
        budget = self.budget(slots)
        return max(self.scan * budget, self.scan_floor) if keyed and budget else budget

    def choose(self, oldest_first: Iterable[W], slots: int, key: Callable[[W], float] | None = None) -> list[W]:
        """The waiters to wake, from the eligible ones in arrival order: the oldest ``budget``, or the
        ``budget`` lowest ``key`` among the :meth:`looks_at` oldest (the oldest among equal keys)."""
        oldest = list(itertools.islice(oldest_first, self.looks_at(slots, key is not None)))
        return oldest if key is None else heapq.nsmallest(self.budget(slots), oldest, key=key)


def narrower_classes(job: JobView, views: Iterable[JobView]) -> frozenset[str]:
    """The eligibility classes of the other open rounds with a free slot whose class has fewer clients than
    ``job``'s: where the waiters of ``job``'s wake are scarcer."""
    return frozenset(view.eligibility_key for view in views
                     if view.open_slots > 0 and view.eligibility_key != job.eligibility_key
                     and view.supply < job.supply)


def sparing_narrower(key: Callable[[C], float], needed: Callable[[C], bool], penalty: float) -> Callable[[C], float]:
    """``key`` (a predicted task time) with the waiters ``needed`` elsewhere (eligible for a
    :func:`narrower_classes` round) counted ``penalty`` times slower: a policy's wake key ranks whom this round
    wants, and a fast client a scarcer round needs is worth more there unless this round's others are much
    slower."""
    return lambda client: key(client) * penalty if needed(client) else key(client)


def wake_order(
    key: Callable[[C], float], job: JobView, views: Callable[[], Iterable[JobView]], penalty: float,
    needed_by: Callable[[frozenset[str]], Callable[[C], bool]],
) -> Callable[[C], float]:
    """The wake order for ``job``'s round, both drivers': the policy's ``key``, with the waiters an open round of
    a narrower class needs counted ``penalty`` times slower (:func:`sparing_narrower`) when the penalty is on and
    such a round is open. ``views``: the open rounds, read only then; ``needed_by``: the driver's test of whether
    a waiter is eligible for any of the given classes."""
    narrower = narrower_classes(job, views()) if penalty > 1.0 else frozenset()
    return sparing_narrower(key, needed_by(narrower), penalty) if narrower else key


class WakeLedger(Generic[C, A]):
    """Which clients ``C`` each round attempt ``A`` woke, and which declined a job (module docstring). An
    attempt is keyed by the driver (live: job, round, attempt; simulator: job index and round token). Bounded
    by what is open: a client is remembered for its latest wake only, an attempt is forgotten when it ends or
    its job's next attempt wakes, and a job keeps its latest ``declined_cap`` decliners until it is done."""

    def __init__(self, declined_cap: int = 4096) -> None:
        self._woken_for: dict[C, A] = {}
        self._woken: dict[A, set[C]] = {}
        self._job_of: dict[A, Hashable] = {}
        self._latest: dict[Hashable, A] = {}  # job -> its attempt that woke last
        self._offered: dict[C, A] = {}  # woken client -> the attempt it was woken for, when offered that job
        self._decliners: dict[Hashable, OrderedDict[C, None]] = {}  # job -> its decliners, oldest first
        self._declined_cap = declined_cap

    def woke(self, job: Hashable, attempt: A, clients: Iterable[C]) -> None:
        """``attempt`` (of ``job``) woke ``clients``."""
        earlier = self._latest.get(job)
        if earlier is not None and earlier != attempt:
            self.ended(earlier)
        self._latest[job], self._job_of[attempt] = attempt, job
        woken = self._woken.setdefault(attempt, set())
        for client in clients:
            self._woken_for[client] = attempt
            woken.add(client)

    def skip(self, attempt: A) -> AbstractSet[C]:
        """The clients ``attempt`` woke already, less those that lost the race (:meth:`settled`), which its next wake
        passes over (a view, not a copy: read it before the next :meth:`woke`)."""
        return self._woken.get(attempt, frozenset())

    def settled(self, client: C, took: A | None, has_free_slot: Callable[[A], bool]) -> A | None:
        """``client`` checked in again or bound (to ``took``; None: to nothing). When it did not take the attempt it
        was woken for, the ledger notes why, asking the driver whether that attempt still has a free slot: a client
        that found no free slot or took another round lost the race (:meth:`_lost`), one that left a free slot
        untaken may have declined the job (:meth:`_declined`). Returns the attempt that should wake one more client:
        the one it was woken for, while that has a free slot; else None."""
        woken = self._woken_for.pop(client, None)
        offered = self._offered.pop(client, None)
        if woken is None or woken == took:
            return None
        free = has_free_slot(woken)
        if took is not None or not free:
            self._lost(client, woken)
        if not free:
            return None
        if took is None and offered == woken:
            self._declined(client, woken)
        return woken

    def _lost(self, client: C, attempt: A) -> None:
        """``client`` left ``attempt`` while the attempt had no free slot, or took another round: it did not decline
        the attempt, so a slot the attempt frees later (a dropped client's lease ends) may wake it again. Held in
        :meth:`skip`, a client that lost the race for a slot stayed idle and eligible while the freed slot stood
        empty: live until its long-poll ended, simulated until another round woke it (a generated workload without
        over-selection: 212 s, its job 2.9x its FIFO JCT)."""
        woken = self._woken.get(attempt)
        if woken is not None:
            woken.discard(client)

    def offered(self, client: C, jobs: Iterable[Hashable]) -> None:
        """The woken ``client`` was offered the rounds of ``jobs``; whether the job it was woken for was among them
        decides, once it settles, whether it declined that job (:meth:`_declined`)."""
        attempt = self._woken_for.get(client)
        if attempt is not None and self._job_of.get(attempt) in jobs:
            self._offered[client] = attempt

    def _declined(self, client: C, attempt: A) -> None:
        """``client`` was offered ``attempt``'s job (:meth:`offered`) and took nothing while the attempt had a free
        slot: it declined the job, and the job's later keyed wakes rank it last. Not a decliner: a client that took
        another job's round (the order put that round first for it), or that was not offered this one (an offer rule
        kept it away, as `doom_guard` does from a round that cannot fill in time); counting those ranked fast
        clients last for good (policy-20jobs, seed 1: 2-4 % longer average JCT)."""
        decliners = self._decliners.setdefault(self._job_of[attempt], OrderedDict())
        decliners[client] = None
        decliners.move_to_end(client)
        if len(decliners) > self._declined_cap:
            decliners.popitem(last=False)

    def rank(self, job: Hashable, key: Callable[[C], float]) -> Callable[[C], float]:
        """``key`` (a keyed wake's order for ``job``'s round) with the job's decliners last."""
        decliners = self._decliners.get(job)
        if not decliners:
            return key
        return lambda client: math.inf if client in decliners else key(client)

    def job_done(self, job: Hashable) -> None:
        """``job`` finished or was cancelled: forget its decliners."""
        self._decliners.pop(job, None)

    def ended(self, attempt: A) -> None:
        """``attempt`` closed or failed: forget whom it woke."""
        for client in self._woken.pop(attempt, ()):
            if self._woken_for.get(client) == attempt:
                del self._woken_for[client]
            if self._offered.get(client) == attempt:
                del self._offered[client]
        job = self._job_of.pop(attempt, None)
        if job is not None and self._latest.get(job) == attempt:
            del self._latest[job]
