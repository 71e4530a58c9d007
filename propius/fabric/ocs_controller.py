"""The per-job OCS controller of Opus as a state machine: check-in → config request → barrier →
reconfigure(r) → ack.

A job's run is a sequence of circuit configurations (*instances*: configuration changes in step order,
over all iterations). Every rank checks in once (its communicators). Right after its last collective on
the current circuits a rank *releases* them (it will next use instance ``k``, or none: it is done).
Before a phase that needs the circuits of instance ``k`` it sends a *config request* for ``k`` — on
demand when it reaches the phase, or speculatively together with the release, so that switching
overlaps the compute before the phase. A request implies the release. The controller acknowledges at
once if ``k`` is already up; otherwise, once someone waits, it moves to the next instance when the
*safety barrier* holds: every rank at either end of a circuit that the change tears down has released
it, so no transfer is on it (a circuit's transfer involves exactly its two end ranks, and a rank
releases only after its collectives on the old circuits have finished). It then reprograms the
changed circuits through :meth:`FabricState.reconfigure`, which refuses any port that is not the
job's own, and after ``r`` it acknowledges every waiting rank.

The controller does no timing itself: a driver (the discrete-event simulator in
:mod:`propius.fabric.ocs_sim`, later a real OCS driver) calls it and carries out its actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from propius.fabric.model import FabricError
from propius.fabric.state import FabricState, OcsCircuit

__all__ = ["Ack", "ControllerStage", "OcsController", "Reconfigure"]


class ControllerStage(StrEnum):
    IDLE = "idle"
    BARRIER = "barrier"
    RECONFIGURING = "reconfiguring"


@dataclass(frozen=True)
class Ack:
    """Tell ``rank`` that the circuits of ``instance`` are up."""

    rank: int
    instance: int


@dataclass(frozen=True)
class Reconfigure:
    """Reprogramming toward ``instance`` has started: ``removed`` are down now, ``added`` are usable after
    ``seconds``; the driver calls :meth:`OcsController.reconfigured` then."""

    instance: int
    removed: frozenset[OcsCircuit]
    added: frozenset[OcsCircuit]
    seconds: float


Action = Ack | Reconfigure


@dataclass
class OcsController:
    """One job's controller. ``instances[0]`` must already be installed (at allocation time).

    ``barrier=False`` switches as soon as anyone asks: unsafe, kept so tests can show that the property
    test catches a torn-down circuit under traffic.
    """

    job: str
    state: FabricState
    instances: Sequence[frozenset[OcsCircuit]]
    rank_of_port: dict[tuple[str, int], int]
    reconfig_s: float
    barrier: bool = True
    active: int = 0
    stage: ControllerStage = ControllerStage.IDLE
    checked_in: set[int] = field(default_factory=set)
    released: dict[int, int] = field(default_factory=dict)
    pending: dict[int, set[int]] = field(default_factory=dict)
    reconfigurations: int = 0
    _ends: dict[int, set[int]] = field(default_factory=dict, repr=False)

    def check_in(self, rank: int) -> None:
        self.checked_in.add(rank)

    def release(self, rank: int, upto: int) -> list[Action]:
        """``rank`` is done with every circuit of instances before ``upto`` (``len(instances)``: all)."""
        self._known(rank, upto, len(self.instances))
        self.released[rank] = max(self.released.get(rank, 0), upto)
        return self._advance()

    def request(self, rank: int, instance: int) -> list[Action]:
        """A config request from ``rank`` for ``instance`` (it releases the instances before it)."""
        self._known(rank, instance, len(self.instances) - 1)
        self.released[rank] = max(self.released.get(rank, 0), instance)
        if instance <= self.active:
            return [Ack(rank, instance)]
        self.pending.setdefault(instance, set()).add(rank)
        return self._advance()

    def reconfigured(self) -> list[Action]:
        """The switch toward the next instance has finished: acknowledge who waits for it."""
        if self.stage != ControllerStage.RECONFIGURING:
            raise FabricError(f"job {self.job!r}", "reconfigured without a reconfiguration in progress")
        self.active += 1
        self.stage = ControllerStage.IDLE
        acks = [Ack(rank, k) for k in sorted(self.pending) if k <= self.active for rank in sorted(self.pending[k])]
        self.pending = {k: ranks for k, ranks in self.pending.items() if k > self.active}
        return acks + self._advance()

    def _known(self, rank: int, instance: int, last: int) -> None:
        if rank not in self.checked_in:
            raise FabricError(f"job {self.job!r} rank {rank}", "sent a config message before checking in")
        if not 0 <= instance <= last:
            raise FabricError(f"job {self.job!r} rank {rank}", f"named unknown configuration {instance}")

    def _advance(self) -> list[Action]:
        if self.stage == ControllerStage.RECONFIGURING or not self.pending:
            return []
        nxt = self.active + 1
        old, new = self.instances[self.active], self.instances[nxt]
        removed, added = old - new, new - old
        ends = self._ends.get(nxt)
        if ends is None:
            ends = self._ends[nxt] = {self.rank_of_port[(c.rail, port)] for c in removed for port in (c.tx, c.rx)}
        if self.barrier and any(self.released.get(rank, 0) < nxt for rank in ends):
            self.stage = ControllerStage.BARRIER
            return []
        self.state.reconfigure(self.job, new)
        self.stage = ControllerStage.RECONFIGURING
        self.reconfigurations += bool(removed or added)
        return [Reconfigure(nxt, removed, added, self.reconfig_s if removed or added else 0.0)]
