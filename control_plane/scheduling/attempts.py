"""One open round attempt as the scheduler tracks it: who works on it and how many results it can expect.

Both drivers keep one :class:`Attempt` per job with an open round and feed it the same three facts
(a client bound, a client delivered, a client left without delivering); the policies read what follows
from them (``JobView.expected_results``, when the round filled, the fastest-fill estimate).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["Attempt"]


@dataclass(slots=True)
class Attempt:
    round: int
    attempt: int
    opened_at: float
    demand: int
    published_at: float | None = None  # when the round's model was published (live only)
    filled_at: float | None = None  # when the demand-th client bound
    # working client -> (bound at, its reliability then)
    members: dict[Hashable, tuple[float, float]] = field(default_factory=dict)
    joined: set[Hashable] = field(default_factory=set)  # every client bound in this attempt (a client binds once)
    expected: float = 0.0  # results in + the members' reliabilities
    # when the first ``demand`` binds came, and when binds passed it over for a newer job (fifo_lag)
    bind_times: list[float] = field(default_factory=list)
    passed_at: list[float] = field(default_factory=list)

    def bound(self, client: Hashable, at: float, reliability: float, bound: int) -> None:
        """``client`` bound at ``at``, the round now holding ``bound`` slots."""
        self.members[client] = (at, reliability)
        self.joined.add(client)
        if len(self.bind_times) < self.demand:
            self.bind_times.append(at)
        self.expected += reliability
        if self.filled_at is None and bound >= self.demand:
            self.filled_at = at

    def passed_over(self, at: float) -> bool:
        """A client this round had a free slot for bound to a job registered after it
        (:mod:`control_plane.scheduling.fifo_lag`). True when this bind is the one that would have filled it
        under FIFO: the only pass that changes what a view shows."""
        if len(self.passed_at) >= self.demand:
            return False
        self.passed_at.append(at)
        return self.filled_at is None and len(self.bind_times) + len(self.passed_at) == self.demand

    def short_under_fifo(self) -> bool:
        """Whether FIFO would still have had a free slot here for one more client: the round has not filled,
        and its binds and the binds that passed it over are fewer than ``demand``."""
        return self.filled_at is None and len(self.bind_times) + len(self.passed_at) < self.demand

    def delivered(self, client: Hashable) -> float | None:
        """``client`` delivered its result; when it had bound (None: it was not working here)."""
        member = self.members.pop(client, None)
        if member is None:
            return None
        self.expected += 1.0 - member[1]
        return member[0]

    def left(self, client: Hashable) -> float | None:
        """``client`` stopped working without a result (dropped, released); when it had bound."""
        member = self.members.pop(client, None)
        if member is None:
            return None
        self.expected -= member[1]
        return member[0]
