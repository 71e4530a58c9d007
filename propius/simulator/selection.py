"""How an idle client finds a job: central binding (any policy), static partitions, client-side random.

- :class:`CentralSelection` is the live control plane's check-in: the policy-ordered open rounds go
  through ``ranked_offers``, the first ``max_offers`` are offered, and the client accepts the first offer
  its private constraints admit (as ``clients.device`` does). A client with no offer waits to be woken.
- :class:`StaticSelection` pins every client to one job (see :mod:`propius.simulator.partition`); the
  same matching code runs on that job alone, so a pinned client idles while its job needs nobody.
- :class:`ClientRandomSelection` has no central matching: the client picks a random job with an open
  round, and the handshake is wasted when the client is ineligible (public or private) or the round
  is full; it then retries after the live server's ``retry_after``.

A selection reads the simulation through :class:`Pool` and changes nothing in it: it only answers
which job a client binds to; the engine does the binding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from control_plane.scheduling.matching import ranked_offers
from policies import JobView, Policy, SchedulingContext
from propius.simulator.jobs import SimJob
from propius.specs import AttributeValue

__all__ = ["CentralSelection", "Choice", "ClientRandomSelection", "Pool", "Selection", "StaticSelection"]


class Pool(Protocol):
    """What a selection reads of the simulation (:class:`propius.simulator.engine.Simulation`)."""

    jobs: list[SimJob]
    policy: Policy
    rng: random.Random
    class_mask: Sequence[int]  # client -> its eligibility classes as bits
    max_offers: int

    def profile(self, client: int) -> Mapping[str, AttributeValue]: ...

    def ordered_views(self) -> list[JobView]: ...

    def view_of(self, job: SimJob) -> JobView: ...

    def context(self, client: int, now: float) -> SchedulingContext: ...

    def joined_by(self, client: int) -> Callable[[JobView], bool]: ...

    def private_ok(self, client: int, job: SimJob) -> bool: ...

    def first_accepted(self, client: int, offers: list[JobView]) -> SimJob | None: ...


class Choice(NamedTuple):
    """What a check-in found: the job the client binds to (None: none), and the rounds the policy would offer
    it, first offered first, which the engine reads for the FIFO-lag measure (empty without central ranking)."""

    job: SimJob | None
    ranked: Sequence[JobView] = ()


class Selection(Protocol):
    polls: bool  # True: an unlucky client retries later; False: it waits to be woken
    handshakes: int  # bind attempts sent without central matching
    wasted_handshakes: int  # of those, refused

    def wake_mask(self, pool: Pool, client: int) -> int: ...

    def choose(self, pool: Pool, client: int, now: float) -> Choice: ...


class CentralSelection:
    polls = False
    handshakes = wasted_handshakes = 0

    def wake_mask(self, pool: Pool, client: int) -> int:
        return pool.class_mask[client]

    def choose(self, pool: Pool, client: int, now: float) -> Choice:
        ordered = pool.ordered_views()
        if not ordered:
            return Choice(None)
        ranked = ranked_offers(pool.profile(client), ordered, pool.policy, pool.context(client, now),
                               joined=pool.joined_by(client))
        return Choice(pool.first_accepted(client, ranked[:pool.max_offers]), ranked)


class StaticSelection:
    polls = False
    handshakes = wasted_handshakes = 0

    def __init__(self, pinned: list[int]) -> None:
        self.pinned = pinned  # client -> job index, -1: none

    def wake_mask(self, pool: Pool, client: int) -> int:
        job = self.pinned[client]
        return 0 if job < 0 else pool.jobs[job].wake_bit

    def choose(self, pool: Pool, client: int, now: float) -> Choice:
        index = self.pinned[client]
        if index < 0 or pool.jobs[index].state != "open":
            return Choice(None)
        ranked = ranked_offers(pool.profile(client), [pool.view_of(pool.jobs[index])], pool.policy,
                               pool.context(client, now), joined=pool.joined_by(client))
        return Choice(pool.first_accepted(client, ranked[:pool.max_offers]), ranked)


class ClientRandomSelection:
    polls = True

    def __init__(self) -> None:
        self.handshakes = 0
        self.wasted_handshakes = 0

    def wake_mask(self, pool: Pool, client: int) -> int:
        return 0

    def choose(self, pool: Pool, client: int, now: float) -> Choice:
        candidates = [job for job in pool.jobs if job.state == "open"]
        if not candidates:
            return Choice(None)
        job = candidates[int(pool.rng.random() * len(candidates))]
        self.handshakes += 1
        if (job.open_slots > 0 and client not in job.current.joined and pool.class_mask[client] & job.class_bit
                and pool.private_ok(client, job)):
            return Choice(job)
        self.wasted_handshakes += 1
        return Choice(None)
