"""How an idle client finds a job: central binding (any policy), static partitions, client-side random.

- :class:`CentralSelection` is the live control plane's check-in: the policy-ordered open rounds go
  through ``offer_candidates``, and the client accepts the first offer its private constraints admit
  (as ``clients.device`` does). A client with no offer waits to be woken.
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
from typing import Protocol

from control_plane.scheduling.matching import offer_candidates
from policies import JobView, Policy, SchedulingContext
from propius.simulator.jobs import SimJob
from propius.specs import AttributeValue

__all__ = ["CentralSelection", "ClientRandomSelection", "Pool", "Selection", "StaticSelection"]


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


class Selection(Protocol):
    polls: bool  # True: an unlucky client retries later; False: it waits to be woken
    handshakes: int  # bind attempts sent without central matching
    wasted_handshakes: int  # of those, refused

    def wake_mask(self, pool: Pool, client: int) -> int: ...

    def choose(self, pool: Pool, client: int, now: float) -> SimJob | None: ...


class CentralSelection:
    polls = False
    handshakes = wasted_handshakes = 0

    def wake_mask(self, pool: Pool, client: int) -> int:
        return pool.class_mask[client]

    def choose(self, pool: Pool, client: int, now: float) -> SimJob | None:
        ordered = pool.ordered_views()
        if not ordered:
            return None
        offers = offer_candidates(pool.profile(client), ordered, pool.policy, pool.context(client, now),
                                  pool.max_offers, joined=pool.joined_by(client))
        return pool.first_accepted(client, offers)


class StaticSelection:
    polls = False
    handshakes = wasted_handshakes = 0

    def __init__(self, pinned: list[int]) -> None:
        self.pinned = pinned  # client -> job index, -1: none

    def wake_mask(self, pool: Pool, client: int) -> int:
        job = self.pinned[client]
        return 0 if job < 0 else pool.jobs[job].wake_bit

    def choose(self, pool: Pool, client: int, now: float) -> SimJob | None:
        index = self.pinned[client]
        if index < 0 or pool.jobs[index].state != "open":
            return None
        offers = offer_candidates(pool.profile(client), [pool.view_of(pool.jobs[index])], pool.policy,
                                  pool.context(client, now), pool.max_offers, joined=pool.joined_by(client))
        return pool.first_accepted(client, offers)


class ClientRandomSelection:
    polls = True

    def __init__(self) -> None:
        self.handshakes = 0
        self.wasted_handshakes = 0

    def wake_mask(self, pool: Pool, client: int) -> int:
        return 0

    def choose(self, pool: Pool, client: int, now: float) -> SimJob | None:
        candidates = [job for job in pool.jobs if job.state == "open"]
        if not candidates:
            return None
        job = candidates[int(pool.rng.random() * len(candidates))]
        self.handshakes += 1
        if (job.open_slots > 0 and client not in job.current.joined and pool.class_mask[client] & job.class_bit
                and pool.private_ok(client, job)):
            return job
        self.wasted_handshakes += 1
        return None
