"""What happens when an accelerator fails, and how long it takes (LUMION; Morphlux's fault manager).

In order of preference:

1. **In-rack swap** on a programmable rack: a spare of the same rack (free spares first, then spares lent
   to preemptible jobs: the job holding the chosen one is *preempted*, its whole allocation released)
   takes the failed chip's logical position. Its rank takes the failed chip's place in the job's rank
   map, circuits on the failed chip's OCS ports move to the spare's ports on the same rails, and, when
   the spare sits in another server, a light path of ``swap_width`` fibres joins the spare's server to
   the failed one's (so the spare reaches the failed chip's neighbours). The job restarts from its
   checkpoint at full bandwidth.
2. **Electrical swap** (a spare in the rack, fixed wiring): the same rank-map change, but the spare
   reaches the job over slower inter-server paths: post-recovery throughput is ``electrical_throughput``
   of the pre-failure one (a modelled loss).
3. **Migrate** when no spare can take the chip: the job is released and placed anew by ``relocate`` (a
   placement plug-in, passed in), paying a restore from checkpoint elsewhere.
4. **Queue**: nowhere to go; the job waits for the repair.

A preemptible job whose chip fails takes only free spares (lent to it in turn), never reclaims one.
The recovery time is the sum of its components (all parameters, defaults from the prototypes' timelines:
≈1.1 s to rewire and restart, ≈4.5 s communicator init, ≈20 s to the first step), plus the work lost
since the last checkpoint (half an interval, expected).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from propius.fabric.model import AcceleratorState
from propius.fabric.state import Allocation, FabricState, FibreCircuit, OcsCircuit
from propius.fabric.torus import shortest_paths

__all__ = ["Recovery", "RecoveryParams", "recover"]

Seconds = Annotated[float, Field(ge=0)]


class RecoveryParams(BaseModel):
    """Recovery-time components (seconds) and the modelled losses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    detect_s: Seconds = 5.0
    program_s: Seconds = 0.1
    restart_s: Seconds = 1.1
    comm_init_s: Seconds = 4.5
    first_step_s: Seconds = 20.0
    checkpoint_interval_s: Seconds = 1800.0
    migrate_restore_s: Seconds = 600.0
    repair_s: Seconds = 168 * 3600.0
    electrical_throughput: Annotated[float, Field(gt=0, le=1)] = 0.5
    swap_width: Annotated[int, Field(ge=1)] = 2


@dataclass(frozen=True)
class Recovery:
    """The action taken for one failure, its time components and the job's throughput afterwards."""

    kind: Literal["in-rack swap", "electrical swap", "migrate", "queue", "no job"]
    job: str | None
    spare: str | None
    components: dict[str, float]
    throughput: float
    preempted: str | None = None
    """The preemptible job released to reclaim ``spare`` (it waits to be placed again), if any."""

    @property
    def time_s(self) -> float:
        return sum(self.components.values())


def recover(state: FabricState, failed: str, params: RecoveryParams,
            relocate: Callable[[FabricState, int], Allocation | None] | None = None) -> Recovery:
    """Mark ``failed`` failed and recover its job (module docstring); changes ``state`` accordingly.

    ``relocate(state, n)`` proposes an allocation of ``n`` accelerators for a migrating job (or None).
    """
    job = state.fail(failed)
    if job is None:
        return Recovery("no job", None, None, {}, 1.0)
    lost = params.checkpoint_interval_s / 2
    rack = state.rack_of(failed)
    spares = [a for a in state.in_state(AcceleratorState.SPARE) if state.rack_of(a) == rack]
    lent = [] if state.allocations[job].preemptible else [a for a in state.lent() if state.rack_of(a) == rack]
    programmable = state.racks[rack].programmable
    for spare in _nearest(state, failed, spares) + _nearest(state, failed, lent):
        holder = state.job_of(spare) if spare in lent else None
        held = state.release(holder) if holder is not None else None
        try:
            state.swap(job, failed, spare, ocs=_moved_ports(state, job, failed, spare),
                       fibre=_path(state, failed, spare, params.swap_width) if programmable else ())
        except ValueError:
            if held is not None:  # this spare cannot serve: the holder keeps it
                state.allocate(holder, held)
            continue
        if programmable:
            parts = {"detect": params.detect_s, "program": params.program_s, "restart": params.restart_s,
                     "comm_init": params.comm_init_s, "first_step": params.first_step_s, "lost_work": lost}
            return Recovery("in-rack swap", job, spare, parts, 1.0, holder)
        parts = {"detect": params.detect_s, "restart": params.restart_s, "comm_init": params.comm_init_s,
                 "first_step": params.first_step_s, "lost_work": lost}
        return Recovery("electrical swap", job, spare, parts, params.electrical_throughput, holder)
    size = len(state.allocations[job].accelerators)
    state.release(job)
    elsewhere = relocate(state, size) if relocate is not None else None
    if elsewhere is not None:
        state.allocate(job, elsewhere)
        parts = {"detect": params.detect_s, "migrate_restore": params.migrate_restore_s,
                 "comm_init": params.comm_init_s, "first_step": params.first_step_s, "lost_work": lost}
        return Recovery("migrate", job, None, parts, 1.0)
    return Recovery("queue", job, None, {"detect": params.detect_s, "repair": params.repair_s, "lost_work": lost}, 1.0)


def _nearest(state: FabricState, failed: str, spares: list[str]) -> list[str]:
    """Spares on the failed chip's host first, then by interposer hops, then fabric order."""
    host = state.accelerators[failed].host
    adjacency = {h: sorted(spec.interposer.fibres) if spec.interposer else [] for h, spec in state.hosts.items()}

    def hops(spare: str) -> int:
        other = state.accelerators[spare].host
        paths = shortest_paths(adjacency, other, host, 1) if other != host else [(host,)]
        return len(paths[0]) - 1 if paths else 1_000

    return sorted(spares, key=hops)


def _path(state: FabricState, failed: str, spare: str, width: int) -> tuple[FibreCircuit, ...]:
    src, dst = state.accelerators[spare].host, state.accelerators[failed].host
    if src == dst:
        return ()
    adjacency = {h: sorted(spec.interposer.fibres) if spec.interposer else [] for h, spec in state.hosts.items()}
    options = shortest_paths(adjacency, src, dst, 3)
    fits = [p for p in options if all(state.edge_load(a, b) + width <= state.fibres[frozenset((a, b))]
                                      for a, b in zip(p, p[1:], strict=False))]
    if not fits:
        raise ValueError(f"no fibre path from {src} to {dst} has {width} free fibres")
    return (FibreCircuit(fits[0], width),)


def _moved_ports(state: FabricState, job: str, failed: str, spare: str) -> tuple[OcsCircuit, ...]:
    moved = []
    for circuit in state.allocations[job].ocs:
        old = state.port_of(circuit.rail, failed)
        if old not in (circuit.tx, circuit.rx):
            continue
        new = state.port_of(circuit.rail, spare)
        if new is None:
            raise ValueError(f"spare {spare} has no port on rail {circuit.rail}")
        moved.append(OcsCircuit(circuit.rail, new if circuit.tx == old else circuit.tx,
                                new if circuit.rx == old else circuit.rx))
    return tuple(moved)
