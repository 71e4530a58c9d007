"""The mutable allocation state of a fabric: who holds which accelerator, OCS circuits, fibre loads.

Every change goes through a method that checks first and then applies all of it, so a refused change
leaves no trace. The invariants (checked by :meth:`FabricState.check_invariants`, property-tested):

1. every accelerator is in exactly one state (free, allocated to one job, spare, failed);
2. every OCS port sends in at most one circuit and receives in at most one (a partial permutation),
   and a circuit only joins ports of accelerators held by the job that owns it: placing one job never
   touches another job's ports;
3. on every interposer edge the fibres used by circuits are at most the edge's fibre count;
4. releasing a job returns every port and every edge count to what it was before it was placed;
5. a spare is *lent* only to a preemptible allocation: it stays in its rack's reserve (:meth:`reserve`),
   returns to spare when the job is released, and recovery may reclaim it (preempting the job).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from propius.fabric.model import AcceleratorState, Fabric, FabricError

__all__ = ["Allocation", "FibreCircuit", "FabricState", "OcsCircuit", "RingShare", "Unplaceable"]


@dataclass(frozen=True)
class OcsCircuit:
    """A circuit on an OCS rail: port ``tx`` sends to port ``rx``."""

    rail: str
    tx: int
    rx: int


@dataclass(frozen=True)
class FibreCircuit:
    """A light path through hosts' interposers (host ids, in order), using ``width`` fibres per edge."""

    path: tuple[str, ...]
    width: int

    def edges(self) -> list[frozenset[str]]:
        return [frozenset(pair) for pair in zip(self.path, self.path[1:], strict=False)]


@dataclass(frozen=True)
class RingShare:
    """One logical ring of a placement and what it gets: ``links`` per accelerator, ``bandwidth_gbps``."""

    name: str
    links: float
    bandwidth_gbps: float


@dataclass(frozen=True)
class Allocation:
    """A placement: accelerators in rank order (the rank map), the circuits it needs, its rings."""

    accelerators: tuple[str, ...]
    ocs: tuple[OcsCircuit, ...] = ()
    fibre: tuple[FibreCircuit, ...] = ()
    rings: tuple[RingShare, ...] = ()
    how: str = ""
    preemptible: bool = False
    lent: tuple[str, ...] = ()
    """Spares among ``accelerators`` (rank order) borrowed by a preemptible allocation; set by the state."""

    @property
    def bandwidth_gbps(self) -> float:
        """Per-accelerator injection bandwidth over all its rings (the AllReduce bandwidth of the slice)."""
        return sum(ring.bandwidth_gbps for ring in self.rings)


@dataclass(frozen=True)
class Unplaceable:
    """A request that cannot be placed now, and why."""

    reason: str


@dataclass
class FabricState:
    """Run-time state over a validated :class:`Fabric`, initialised from the states and circuits in it."""

    fabric: Fabric
    _state: dict[str, AcceleratorState] = field(init=False)
    _job: dict[str, str] = field(init=False)
    _circuits: dict[str, dict[int, int]] = field(init=False)
    _port_owner: dict[tuple[str, int], str] = field(init=False)
    _edge_load: Counter[frozenset[str]] = field(init=False)
    _allocations: dict[str, Allocation] = field(init=False)

    def __post_init__(self) -> None:
        self.accelerators = {a.id: a for a in self.fabric.accelerators}
        self.hosts = {h.id: h for h in self.fabric.hosts}
        self.racks = {r.id: r for r in self.fabric.racks}
        self.rails = {r.id: r for r in self.fabric.rails}
        self.fibres: dict[frozenset[str], int] = {}
        for host in self.fabric.hosts:
            for other, count in (host.interposer.fibres.items() if host.interposer else ()):
                self.fibres[frozenset((host.id, other))] = count
        self._port_of = {(rail.id, acc): port for rail in self.fabric.rails for port, acc in rail.ports.items()}
        self._state = {a.id: a.state for a in self.fabric.accelerators}
        self._job = {a.id: a.job for a in self.fabric.accelerators if a.job is not None}
        self._circuits = {rail.id: dict(rail.circuits) for rail in self.fabric.rails}
        self._port_owner = {}
        self._edge_load = Counter()
        by_job: dict[str, list[str]] = {}
        for acc, job in self._job.items():
            by_job.setdefault(job, []).append(acc)
        circuits_of: dict[str, list[OcsCircuit]] = {}
        for rail in self.fabric.rails:
            for tx, rx in rail.circuits.items():
                job = self._job[rail.ports[tx]]
                circuits_of.setdefault(job, []).append(OcsCircuit(rail.id, tx, rx))
                self._port_owner[(rail.id, tx)] = self._port_owner[(rail.id, rx)] = job
        self._allocations = {job: Allocation(tuple(accs), tuple(circuits_of.get(job, ())), how="from the fabric file")
                             for job, accs in by_job.items()}

    # ---- queries ----
    def state(self, acc: str) -> AcceleratorState:
        return self._state[acc]

    def job_of(self, acc: str) -> str | None:
        return self._job.get(acc)

    def free(self) -> list[str]:
        """Free accelerators, in fabric order."""
        return [a for a, s in self._state.items() if s == AcceleratorState.FREE]

    def in_state(self, state: AcceleratorState) -> list[str]:
        return [a for a, s in self._state.items() if s == state]

    def rack_of(self, acc: str) -> str:
        return self.hosts[self.accelerators[acc].host].rack

    def lent(self) -> dict[str, str]:
        """Spares lent to preemptible jobs and still held by them: accelerator -> job."""
        return {acc: job for job, allocation in self._allocations.items() for acc in allocation.lent
                if self._job.get(acc) == job and self._state[acc] == AcceleratorState.ALLOCATED}

    def reserve(self, rack: str) -> int:
        """The rack's spares, lent ones included: what recovery can swap in."""
        spares = [a for a, s in self._state.items() if s == AcceleratorState.SPARE]
        return sum(self.rack_of(a) == rack for a in [*spares, *self.lent()])

    def spares_as_free(self) -> FabricState:
        """A copy showing every spare as free, for a placement plug-in proposing where a preemptible request
        may go (:meth:`policies.placement.base.Placement.allocation_for`); commit on this state, not the copy."""
        view = copy.copy(self)
        view._state = {a: AcceleratorState.FREE if s == AcceleratorState.SPARE else s for a, s in self._state.items()}
        view._job, view._port_owner = dict(self._job), dict(self._port_owner)
        view._allocations = dict(self._allocations)
        view._circuits = {rail: dict(c) for rail, c in self._circuits.items()}
        view._edge_load = Counter(self._edge_load)
        return view

    def edge_load(self, a: str, b: str) -> int:
        return self._edge_load[frozenset((a, b))]

    def edge_loads(self) -> dict[frozenset[str], int]:
        return {edge: load for edge, load in self._edge_load.items() if load}

    def circuits(self, rail: str) -> dict[int, int]:
        return dict(self._circuits[rail])

    def port_of(self, rail: str, acc: str) -> int | None:
        return self._port_of.get((rail, acc))

    def port_owner(self, rail: str, port: int) -> str | None:
        return self._port_owner.get((rail, port))

    @property
    def allocations(self) -> dict[str, Allocation]:
        return dict(self._allocations)

    # ---- changes ----
    def allocate(self, job: str, allocation: Allocation) -> None:
        """Give ``job`` the allocation; FabricError names what stands in the way, and nothing changes.

        Spares in it are lent (``allocation.lent`` is recomputed here), which only a preemptible one may.
        """
        self._check(job, allocation, owned=set(), replacing=False)
        lent = tuple(a for a in allocation.accelerators if self._state[a] == AcceleratorState.SPARE)
        if lent and not allocation.preemptible:
            raise FabricError(f"accelerator {lent[0]!r}", "is a spare: only a preemptible allocation may borrow it")
        allocation = replace(allocation, lent=lent)
        for acc in allocation.accelerators:
            self._state[acc] = AcceleratorState.ALLOCATED
            self._job[acc] = job
        self._add_circuits(job, allocation)
        self._allocations[job] = allocation

    def release(self, job: str) -> Allocation:
        """Take the job's allocation back: its healthy accelerators become free (lent spares spare again), its
        circuits and fibres go."""
        allocation = self._allocation(job)
        for acc in allocation.accelerators:
            if self._job.get(acc) == job:
                del self._job[acc]
                if self._state[acc] == AcceleratorState.ALLOCATED:
                    self._state[acc] = AcceleratorState.SPARE if acc in allocation.lent else AcceleratorState.FREE
        self._remove_circuits(allocation)
        del self._allocations[job]
        return allocation

    def set_state(self, acc: str, state: AcceleratorState) -> None:
        """Mark a free, spare or failed accelerator free, spare or failed (repair, reserve, retire).

        An allocated accelerator changes only through :meth:`fail`, :meth:`swap` or :meth:`release`.
        """
        self._known(acc)
        if self._state[acc] == AcceleratorState.ALLOCATED or state == AcceleratorState.ALLOCATED:
            raise FabricError(f"accelerator {acc!r}", "allocation changes only through allocate, swap or release")
        self._state[acc] = state

    def fail(self, acc: str) -> str | None:
        """Mark ``acc`` failed; returns the job that held it (it keeps the failed chip until recovered)."""
        self._known(acc)
        self._state[acc] = AcceleratorState.FAILED
        return self._job.get(acc)

    def swap(self, job: str, failed: str, spare: str, ocs: Iterable[OcsCircuit] = (),
             fibre: Iterable[FibreCircuit] = ()) -> Allocation:
        """The spare takes the failed accelerator's rank in ``job``; the job's circuits become its current
        ones with every circuit through the failed chip's ports replaced by ``ocs``, plus ``fibre``. A spare
        taken by a preemptible job is lent (stays in the reserve); a lent spare must be released first."""
        allocation = self._allocation(job)
        if failed not in allocation.accelerators or self._job.get(failed) != job:
            raise FabricError(f"accelerator {failed!r}", f"is not held by job {job!r}")
        self._known(spare)
        if self._state[spare] not in (AcceleratorState.SPARE, AcceleratorState.FREE):
            raise FabricError(f"accelerator {spare!r}", f"is {self._state[spare]}, not a spare or free")
        failed_ports = {(rail, port) for (rail, acc), port in self._port_of.items() if acc == failed}
        kept = tuple(c for c in allocation.ocs if not {(c.rail, c.tx), (c.rail, c.rx)} & failed_ports)
        ranks = tuple(spare if acc == failed else acc for acc in allocation.accelerators)
        borrowed = (spare,) if allocation.preemptible and self._state[spare] == AcceleratorState.SPARE else ()
        updated = replace(allocation, accelerators=ranks, ocs=kept + tuple(ocs), fibre=allocation.fibre + tuple(fibre),
                          how=f"{allocation.how}; {spare} replaced {failed}",
                          lent=tuple(a for a in ranks if a in allocation.lent or a in borrowed))
        self._remove_circuits(allocation)
        try:
            self._check(job, updated, owned={a for a in ranks if a != spare}, replacing=True)
        except FabricError:
            self._add_circuits(job, allocation)
            raise
        del self._job[failed]
        self._state[spare] = AcceleratorState.ALLOCATED
        self._job[spare] = job
        self._add_circuits(job, updated)
        self._allocations[job] = updated
        return updated

    def reconfigure(self, job: str, ocs: Iterable[OcsCircuit]) -> Allocation:
        """Replace the job's OCS circuits by ``ocs`` (a phase change of Opus). Checked like an allocation:
        only the job's own ports, each sending and receiving at most once; a refusal changes nothing."""
        allocation = self._allocation(job)
        updated = replace(allocation, ocs=tuple(ocs))
        self._remove_circuits(replace(allocation, fibre=()))
        try:
            self._check(job, replace(updated, fibre=()), owned=set(allocation.accelerators), replacing=True)
        except FabricError:
            self._add_circuits(job, replace(allocation, fibre=()))
            raise
        self._add_circuits(job, replace(updated, fibre=()))
        self._allocations[job] = updated
        return updated

    # ---- internals ----
    def _known(self, acc: str) -> None:
        if acc not in self._state:
            raise FabricError(f"accelerator {acc!r}", "is not in the fabric")

    def _allocation(self, job: str) -> Allocation:
        if job not in self._allocations:
            raise FabricError(f"job {job!r}", "holds no allocation")
        return self._allocations[job]

    def _check(self, job: str, allocation: Allocation, owned: set[str], replacing: bool) -> None:
        """Refuse an allocation that breaks an invariant; ``owned``: accelerators the job already holds."""
        if job in self._allocations and not replacing:
            raise FabricError(f"job {job!r}", "already holds an allocation")
        accs = allocation.accelerators
        if not accs or len(set(accs)) != len(accs):
            raise FabricError(f"job {job!r}", "an allocation lists each accelerator once, at least one")
        for acc in accs:
            self._known(acc)
            if acc not in owned and self._state[acc] not in (AcceleratorState.FREE, AcceleratorState.SPARE):
                raise FabricError(f"accelerator {acc!r}", f"is {self._state[acc]}"
                                  + (f" (job {self._job[acc]!r})" if acc in self._job else ""))
        held = set(accs)
        senders: set[tuple[str, int]] = set()
        receivers: set[tuple[str, int]] = set()
        for circuit in allocation.ocs:
            name = f"rail {circuit.rail!r}"
            rail = self.rails.get(circuit.rail)
            if rail is None or rail.kind != "ocs":
                raise FabricError(name, "is not an OCS rail")
            for port, used, role in ((circuit.tx, senders, "sends"), (circuit.rx, receivers, "receives")):
                if rail.ports.get(port) not in held:
                    raise FabricError(name, f"port {port} is not a port of this job's accelerators")
                if (circuit.rail, port) in used:
                    raise FabricError(name, f"port {port} {role} in two circuits")
                used.add((circuit.rail, port))
            busy_rx = set(self._circuits[circuit.rail].values())
            if circuit.tx in self._circuits[circuit.rail] or circuit.rx in busy_rx:
                raise FabricError(name, f"circuit {circuit.tx}->{circuit.rx}: a port is already in a circuit")
        extra: Counter[frozenset[str]] = Counter()
        for circuit in allocation.fibre:
            if circuit.width < 1:
                raise FabricError("fibre circuit", f"width must be >= 1, got {circuit.width}")
            for edge in circuit.edges():
                if edge not in self.fibres:
                    raise FabricError(f"interposer edge {'-'.join(sorted(edge))}", "has no fibres")
                extra[edge] += circuit.width
        for edge, more in extra.items():
            if self._edge_load[edge] + more > self.fibres[edge]:
                raise FabricError(f"interposer edge {'-'.join(sorted(edge))}",
                                  f"load {self._edge_load[edge]} + {more} exceeds its {self.fibres[edge]} fibres")

    def _add_circuits(self, job: str, allocation: Allocation) -> None:
        for circuit in allocation.ocs:
            self._circuits[circuit.rail][circuit.tx] = circuit.rx
            self._port_owner[(circuit.rail, circuit.tx)] = job
            self._port_owner[(circuit.rail, circuit.rx)] = job
        for circuit in allocation.fibre:
            for edge in circuit.edges():
                self._edge_load[edge] += circuit.width

    def _remove_circuits(self, allocation: Allocation) -> None:
        for circuit in allocation.ocs:
            del self._circuits[circuit.rail][circuit.tx]
            self._port_owner.pop((circuit.rail, circuit.tx), None)
            if circuit.rx not in self._circuits[circuit.rail]:
                self._port_owner.pop((circuit.rail, circuit.rx), None)
        for circuit in allocation.fibre:
            for edge in circuit.edges():
                self._edge_load[edge] -= circuit.width

    def check_invariants(self) -> None:
        """Raise AssertionError if any invariant of the module docstring does not hold."""
        for acc, state in self._state.items():
            assert (state == AcceleratorState.ALLOCATED) <= (acc in self._job), f"{acc} allocated without a job"
            assert (acc in self._job) <= (state in (AcceleratorState.ALLOCATED, AcceleratorState.FAILED)), acc
        for job, allocation in self._allocations.items():
            assert all(self._job.get(a) == job or self._state[a] == AcceleratorState.FAILED
                       for a in allocation.accelerators), job
            assert allocation.preemptible or not allocation.lent, f"{job}: a spare lent to a non-preemptible job"
            assert set(allocation.lent) <= set(allocation.accelerators), f"{job}: lends a spare it does not hold"
        for rail_id, circuits in self._circuits.items():
            assert len(set(circuits.values())) == len(circuits), f"{rail_id}: a port receives twice"
            ports = self.rails[rail_id].ports
            for tx, rx in circuits.items():
                owners = {self._job.get(ports[tx]), self._job.get(ports[rx])}
                assert len(owners) == 1 and None not in owners, f"{rail_id}: {tx}->{rx} crosses jobs"
        expected: Counter[frozenset[str]] = Counter()
        for allocation in self._allocations.values():
            for circuit in allocation.fibre:
                for edge in circuit.edges():
                    expected[edge] += circuit.width
        assert +expected == +self._edge_load, "edge loads differ from the allocations' circuits"
        for edge, load in self._edge_load.items():
            assert 0 <= load <= self.fibres[edge], f"{sorted(edge)}: load {load} > {self.fibres[edge]} fibres"
