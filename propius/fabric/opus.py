"""The Opus planner: per-phase circuits on a job's OCS rails, merged into as few configurations as hold.

From a placement (the rank map of an :class:`~propius.fabric.state.Allocation`) and an iteration's
phases, for every phase and group it finds the path: inside a scale-up domain (no circuits), on an EPS
rail (any-to-any, no circuits) or on an OCS rail, where it derives the circuits:

- a ring collective: one cyclic permutation of the members' ports, in group order (Tx of member i to
  Rx of member i+1);
- a send-recv pair (a pipeline stage boundary): one circuit from the sender's port to the receiver's;
- an all-to-all: a costed choice between a *ring relay* (one ring, chunks forwarded hop by hop, no
  reconfiguration inside the phase) and *direct* circuits (one shift permutation per step, ``n − 2``
  reconfigurations per all-to-all, each costing the switching time plus a controller round trip).

A group whose members sit on different hosts *and* different local indices cannot be served by one
rail; planning refuses it and names the group (place the job rail-aligned).

Merging: walking the phases in order, a phase joins the current configuration when the union of their
circuits is still a partial permutation on every rail (no port sends or receives twice); phases
without circuits (scale-up, EPS) join whatever is up. The last configuration of an iteration merges
into the first when compatible, since iterations repeat. Each change between consecutive
configurations is one reconfiguration at a phase boundary: the planner's analytic prediction charges
``r + 2·control`` for it on demand and ``max(0, r + 2·control − gap)`` with speculative (early)
requests, ``gap`` being the compute before the phase; :mod:`propius.fabric.ocs_sim` measures it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from propius.fabric.alpha_beta import LinkCost, all_to_all_relay, collective_time
from propius.fabric.model import FabricError
from propius.fabric.phases import RING_COLLECTIVES, Collective, Phase
from propius.fabric.state import Allocation, FabricState, OcsCircuit

__all__ = ["Configuration", "Plan", "Step", "compatible", "plan_job"]

MAX_DIRECT_STEPS = 4096
"""Direct all-to-all expands into ``count · (n − 1)`` steps; beyond this many the relay is used."""

Mode = Literal["on-demand", "speculative"]
AllToAll = Literal["auto", "relay", "direct"]


@dataclass(frozen=True)
class Step:
    """A phase as the fabric runs it: per group its circuits and seconds (``count`` collectives)."""

    phase: Phase
    path: str
    group_circuits: tuple[frozenset[OcsCircuit], ...]
    group_seconds: tuple[float, ...]
    note: str = ""

    @property
    def circuits(self) -> frozenset[OcsCircuit]:
        return frozenset().union(*self.group_circuits)

    @property
    def seconds(self) -> float:
        return max(self.group_seconds, default=0.0)


@dataclass(frozen=True)
class Configuration:
    """The circuits up while ``steps`` (indices into the plan's steps) run."""

    circuits: frozenset[OcsCircuit]
    steps: tuple[int, ...]

    def by_rail(self) -> dict[str, list[tuple[int, int]]]:
        rails: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for c in sorted(self.circuits, key=lambda c: (c.rail, c.tx, c.rx)):
            rails[c.rail].append((c.tx, c.rx))
        return dict(rails)


@dataclass(frozen=True)
class Plan:
    """A job's phases as run (``steps``), the configurations they need and which one each step runs under
    (``config_of``); its predictions are deterministic (no jitter)."""

    job: str
    ranks: tuple[str, ...]
    reconfig_s: float
    control_s: float
    steps: tuple[Step, ...]
    configs: tuple[Configuration, ...]
    config_of: tuple[int, ...]
    merged: bool
    hosts: int = 0

    def _circuit_steps(self) -> list[int]:
        return [i for i, step in enumerate(self.steps) if step.circuits]

    def boundaries(self) -> list[int]:
        """Steps at which the configuration changes (cyclically: iterations repeat); only steps that use
        circuits count, the others run on whatever is up."""
        ci = self._circuit_steps()
        return [i for k, i in enumerate(ci) if self.config_of[i] != self.config_of[ci[k - 1]]]

    def reconfigurations(self) -> int:
        return len(self.boundaries())

    def gap_before(self, i: int) -> float:
        """Time from the end of the previous circuit step to the start of step ``i``'s communication
        without switching: its compute plus the whole of any circuit-free steps in between."""
        gap = self.steps[i].phase.compute_s
        j = (i - 1) % len(self.steps)
        while j != i and not self.steps[j].circuits:
            gap += self.steps[j].phase.compute_s + self.steps[j].seconds
            j = (j - 1) % len(self.steps)
        return gap

    def compute_s(self) -> float:
        return sum(s.phase.compute_s for s in self.steps)

    def comm_s(self) -> float:
        return sum(s.seconds for s in self.steps)

    def exposed_s(self, mode: Mode) -> float:
        """Analytic switching time exposed per iteration (the DES in ocs_sim measures the same)."""
        cost = self.reconfig_s + 2 * self.control_s
        if mode == "on-demand":
            return cost * self.reconfigurations()
        return sum(max(0.0, cost - self.gap_before(i)) for i in self.boundaries())

    def iteration_s(self, mode: Mode | None = None) -> float:
        return self.compute_s() + self.comm_s() + (self.exposed_s(mode) if mode else 0.0)

    def render(self, ideal: Plan | None = None) -> str:
        """A readable plan: configurations, their phases and circuits per rail, the predicted cost."""
        lines = [f"plan for job {self.job!r}: {len(self.ranks)} ranks on {self.hosts} hosts, reconfiguration "
                 f"{self.reconfig_s * 1e3:g} ms, controller round trip {2 * self.control_s * 1e3:g} ms",
                 f"{len(self.steps)} phases per iteration -> {len(self.configs)} configuration(s), "
                 f"{self.reconfigurations()} reconfiguration(s) per iteration"
                 + (" (compatible phases merged)" if self.merged else " (no merging)")]
        for k, config in enumerate(self.configs):
            names = [self.steps[i].phase.name for i in _run_order(config.steps, len(self.steps))]
            shown = ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]} .. {names[-1]} ({len(names)})"
            lines.append(f"config {k}: {shown}")
            for rail, pairs in config.by_rail().items():
                lines.append(f"  {rail}: " + " ".join(f"{tx}->{rx}" for tx, rx in pairs))
            if not config.circuits:
                lines.append("  (no circuits: scale-up or EPS only)")
        notes = sorted({s.note for s in self.steps if s.note})
        lines += [f"note: {n}" for n in notes]
        base = (ideal or self).iteration_s()
        lines.append(f"predicted iteration: always-connected {base:.3f} s; "
                     + "; ".join(f"{mode} {self.iteration_s(mode):.3f} s (+{self.iteration_s(mode) / base - 1:.1%})"
                                 for mode in ("on-demand", "speculative")))
        return "\n".join(lines)


def _run_order(steps: tuple[int, ...], n: int) -> list[int]:
    """A configuration's steps in the order they run: one that wraps the iteration starts after its gap."""
    idx = list(steps)
    if idx and idx[0] == 0 and idx[-1] == n - 1:
        breaks = [k for k in range(1, len(idx)) if idx[k] - idx[k - 1] > 1]
        if breaks:
            return idx[breaks[-1]:] + idx[:breaks[-1]]
    return idx


def compatible(circuits: frozenset[OcsCircuit]) -> bool:
    """True if, on every rail, no port sends twice and no port receives twice (a partial permutation)."""
    tx = [(c.rail, c.tx) for c in circuits]
    rx = [(c.rail, c.rx) for c in circuits]
    return len(set(tx)) == len(tx) and len(set(rx)) == len(rx)


def plan_job(state: FabricState, allocation: Allocation, phases: Sequence[Phase], *, job: str = "job",
             reconfig_s: float = 0.1, control_s: float = 0.0005, merge: bool = True,
             always_connected: bool = False, all_to_all: AllToAll = "auto") -> Plan:
    """Plan ``phases`` for the placement ``allocation`` (its accelerators in rank order).

    ``always_connected`` plans the ideal fabric: every rail any-to-any (as an EPS rail holding every
    circuit at once), no reconfiguration — the baseline of the overhead figures. ``all_to_all`` forces
    the relay or the direct circuits instead of the costed choice (for ablations).
    """
    router = _Router(state, allocation.accelerators, always_connected, all_to_all)
    steps: list[Step] = []
    for phase in phases:
        steps.extend(router.steps(phase, reconfig_s + 2 * control_s))
    configs, config_of = _configure(steps, merge)
    hosts = len({state.accelerators[a].host for a in allocation.accelerators})
    return Plan(job, allocation.accelerators, reconfig_s, control_s, tuple(steps), configs, config_of, merge, hosts)


def _configure(steps: list[Step], merge: bool) -> tuple[tuple[Configuration, ...], tuple[int, ...]]:
    """Group the circuit steps into configurations; circuit-free steps join the configuration before."""
    ci = [i for i, step in enumerate(steps) if step.circuits]
    sets: list[frozenset[OcsCircuit]] = []
    members: list[list[int]] = []
    for i in ci:
        need = steps[i].circuits
        if sets and (need <= sets[-1] or (merge and compatible(sets[-1] | need))):
            sets[-1] |= need
            members[-1].append(i)
        else:
            sets.append(need)
            members.append([i])
    if len(sets) > 1 and (sets[-1] == sets[0] or (merge and compatible(sets[-1] | sets[0]))):
        sets[0] |= sets.pop()
        members[0] = members.pop() + members[0]
    if not sets:
        return (Configuration(frozenset(), tuple(range(len(steps)))),), (0,) * len(steps)
    config_of = [0] * len(steps)
    for k, idx in enumerate(members):
        for i in idx:
            config_of[i] = k
    last = config_of[ci[-1]]
    for i, step in enumerate(steps):  # circuit-free steps: whatever is up (cyclically, the last one)
        if not step.circuits:
            config_of[i] = last
        else:
            last = config_of[i]
    return (tuple(Configuration(s, tuple(i for i in range(len(steps)) if config_of[i] == k))
                  for k, s in enumerate(sets)), tuple(config_of))


@dataclass(frozen=True)
class _Route:
    """Where a group runs: ``kind`` scale-up, eps or ocs; on OCS its members' ports on ``rail``."""

    kind: str
    link: LinkCost
    rail: str = ""
    ports: tuple[int, ...] = ()

    def circuits(self, collective: Collective, shift: int = 1) -> frozenset[OcsCircuit]:
        """Send-recv: one circuit; ring collectives and all-to-all shifts: a cyclic permutation."""
        p = self.ports
        if self.kind != "ocs":
            return frozenset()
        if collective == Collective.SEND_RECV:
            return frozenset({OcsCircuit(self.rail, p[0], p[1])})
        if collective in RING_COLLECTIVES or collective == Collective.ALL_TO_ALL:
            return frozenset(OcsCircuit(self.rail, p[i], p[(i + shift) % len(p)]) for i in range(len(p)))
        raise FabricError(f"collective {collective}", "has no circuit pattern")


class _Router:
    """Paths and circuits of a placed job's groups."""

    def __init__(self, state: FabricState, ranks: tuple[str, ...], always_connected: bool,
                 all_to_all: AllToAll) -> None:
        self.state, self.ranks, self.ideal, self.all_to_all = state, ranks, always_connected, all_to_all
        self.rail_of_index = {r.index: r for r in state.fabric.rails}
        self.nic = {link.a: link for link in state.fabric.links if link.kind == "nic-rail"}
        self.scale_up = {frozenset((link.a, link.b)): link for link in state.fabric.links if link.kind == "scale-up"}

    def steps(self, phase: Phase, switch_s: float) -> list[Step]:
        routes = [self._route(phase, group) for group in phase.groups]
        if phase.collective == Collective.ALL_TO_ALL and any(r.kind == "ocs" for r in routes):
            return self._all_to_all(phase, routes, switch_s)
        circuits, seconds = [], []
        for group, route in zip(phase.groups, routes, strict=True):
            circuits.append(route.circuits(phase.collective))
            seconds.append(phase.count * collective_time(phase.collective, len(group), phase.bytes, route.link))
        return [Step(phase, "+".join(sorted({r.kind for r in routes})), tuple(circuits), tuple(seconds))]

    def _route(self, phase: Phase, group: tuple[int, ...]) -> _Route:
        where = f"phase {phase.name!r} group {list(group)}"
        if max(group) >= len(self.ranks):
            raise FabricError(where, f"rank {max(group)} is beyond the job's {len(self.ranks)} ranks")
        accs = [self.state.accelerators[self.ranks[r]] for r in group]
        if len({a.host for a in accs}) == 1 and len({a.domain for a in accs}) == 1:
            link = self.scale_up.get(frozenset((accs[0].id, accs[1].id)))
            return _Route("scale-up", LinkCost.of(latency_us=link.latency_us if link else 0.5,
                                                  bandwidth_gbps=link.bandwidth_gbps if link else 900.0))
        indices = {a.index for a in accs}
        if len(indices) != 1 or len({a.host for a in accs}) != len(accs):
            raise FabricError(where, f"spans hosts on local indices {sorted(indices)}: a rail joins one local index "
                                     "per host; place the job rail-aligned")
        rail = self.rail_of_index.get(accs[0].index)
        if rail is None:
            raise FabricError(where, f"no rail serves local index {accs[0].index}")
        nic = self.nic.get(accs[0].id)
        link = LinkCost.of(latency_us=nic.latency_us if nic else 2.0, bandwidth_gbps=rail.bandwidth_gbps)
        if rail.kind == "eps" or self.ideal:
            return _Route("eps", link)
        ports = [self.state.port_of(rail.id, a.id) for a in accs]
        missing = [a.id for a, p in zip(accs, ports, strict=True) if p is None]
        if missing:
            raise FabricError(f"rail {rail.id!r}", f"accelerator {missing[0]!r} has no port ({where})")
        return _Route("ocs", link, rail.id, tuple(p for p in ports if p is not None))

    def _all_to_all(self, phase: Phase, routes: list[_Route], switch_s: float) -> list[Step]:
        """Ring relay (one configuration) or direct shift permutations, whichever is cheaper at this r."""
        n = max(len(g) for g in phase.groups)
        link = routes[0].link
        relay = phase.count * all_to_all_relay(n, phase.bytes, link)
        direct = phase.count * collective_time(Collective.ALL_TO_ALL, n, phase.bytes, link)
        switches = phase.count * (n - 2)
        choice = "direct" if n > 2 and direct + switches * switch_s < relay else "relay"
        if self.all_to_all != "auto" and n > 2:
            choice = self.all_to_all
        if phase.count * (n - 1) > MAX_DIRECT_STEPS:
            choice = "relay"
        forced = "" if self.all_to_all == "auto" else ", forced"
        note = (f"{phase.kind.upper()} all-to-all over {n}: {choice}{forced} (relay {relay * 1e3:.2f} ms vs direct "
                f"{direct * 1e3:.2f} ms + {switches} switches x {switch_s * 1e3:g} ms)")
        if choice == "relay":
            circuits = tuple(r.circuits(Collective.ALL_TO_ALL) for r in routes)
            seconds = tuple(phase.count * (all_to_all_relay(len(g), phase.bytes, r.link) if r.kind == "ocs" else
                                           collective_time(Collective.ALL_TO_ALL, len(g), phase.bytes, r.link))
                            for g, r in zip(phase.groups, routes, strict=True))
            return [Step(phase, "ocs", circuits, seconds, note)]
        steps = []
        for c in range(phase.count):  # snake order: consecutive all-to-alls share their boundary shift
            shifts = range(1, n) if c % 2 == 0 else range(n - 1, 0, -1)
            for s in shifts:
                sub = replace(phase, name=f"{phase.name}.{c}.s{s}", count=1,
                              compute_s=phase.compute_s if not steps else 0.0)
                circuits = tuple(r.circuits(Collective.ALL_TO_ALL, s) for r in routes)
                seconds = tuple(r.link.transfer(phase.bytes / len(g))
                                for g, r in zip(phase.groups, routes, strict=True))
                steps.append(Step(sub, "ocs", circuits, seconds, note))
        return steps
