"""How an idle client finds a job: central binding (any policy), static partitions, client-side random.

- :class:`CentralSelection` is the live control plane's check-in: the policy-ordered snapshot goes
  through ``control_plane.matching.offer_candidates``, and the client accepts the first offer its
  private constraints admit (as ``clients.device`` does). A client with no offer waits to be woken.
- :class:`StaticSelection` pins every client to one job (see :mod:`propius.simulator.partition`); the
  same matching code runs on that job alone, so a pinned client idles while its job needs nobody.
- :class:`ClientRandomSelection` has no central matching: the client picks a random job with an open
  round, and the handshake is wasted when the client is ineligible (public or private) or the round
  is full; it then retries after the live server's ``retry_after`` (15 to 30 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from control_plane.matching import offer_candidates

if TYPE_CHECKING:
    from propius.simulator.engine import Simulation
    from propius.simulator.jobs import SimJob

__all__ = ["CentralSelection", "ClientRandomSelection", "Selection", "StaticSelection"]


class Selection(Protocol):
    polls: bool  # True: an unlucky client retries later; False: it waits to be woken

    def wake_mask(self, sim: Simulation, client: int) -> int: ...

    def choose(self, sim: Simulation, client: int, now: float) -> SimJob | None: ...


class CentralSelection:
    polls = False

    def wake_mask(self, sim: Simulation, client: int) -> int:
        return sim.class_mask[client]

    def choose(self, sim: Simulation, client: int, now: float) -> SimJob | None:
        ordered = sim.ordered_views()
        if not ordered:
            return None
        offers = offer_candidates(sim.population.profiles[client], ordered, sim.policy, sim.context(client, now),
                                  sim.config.max_offers, joined=sim.joined_by(client))
        return sim.first_accepted(client, offers)


class StaticSelection:
    polls = False

    def __init__(self, pinned: list[int]) -> None:
        self.pinned = pinned  # client -> job index, -1: none

    def wake_mask(self, sim: Simulation, client: int) -> int:
        job = self.pinned[client]
        return 0 if job < 0 else sim.jobs[job].wake_bit

    def choose(self, sim: Simulation, client: int, now: float) -> SimJob | None:
        index = self.pinned[client]
        if index < 0 or sim.jobs[index].state != "open":
            return None
        offers = offer_candidates(sim.population.profiles[client], [sim.view_of(sim.jobs[index])], sim.policy,
                                  sim.context(client, now), sim.config.max_offers, joined=sim.joined_by(client))
        return sim.first_accepted(client, offers)


class ClientRandomSelection:
    polls = True

    def wake_mask(self, sim: Simulation, client: int) -> int:
        return 0

    def choose(self, sim: Simulation, client: int, now: float) -> SimJob | None:
        candidates = [job for job in sim.jobs if job.state == "open"]
        if not candidates:
            return None
        job = candidates[int(sim.rng.random() * len(candidates))]
        sim.handshakes += 1
        if (job.open_slots > 0 and client not in job.joined and sim.class_mask[client] & job.class_bit
                and sim.private_ok(client, job)):
            return job
        sim.wasted_handshakes += 1
        return None
