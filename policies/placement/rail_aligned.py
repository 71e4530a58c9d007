"""Rail-aligned placement for rail-optimized fabrics (Photonic Rails / Opus, Ding et al.).

Every host of the job contributes the *same* set of local indices ``L``, so each cross-host group meets
on its own rails, and TP groups are consecutive blocks of ``L`` inside one scale-up domain. Among the
feasible (``k = |L|`` per host, ``L``, hosts) choices it picks the fewest racks, then the fewest rails
carrying cross-host traffic (none on a single host), then the fewest hosts; TP groups are dealt to
hosts either host by host or round robin, whichever leaves no DP/PP bytes crossing rails
(:mod:`propius.fabric.traffic`). On OCS rails it adds, per used rail, a ring of circuits over the job's
own ports, and only those: it never touches another job's ports.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from policies.placement.base import Allocation, Placement, Unplaceable
from propius.fabric.request import CloudRequest, Parallelism
from propius.fabric.state import FabricState, OcsCircuit
from propius.fabric.traffic import traffic_split


class RailAlignedPlacement(Placement):
    name = "rail-aligned"

    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        degrees = request.degrees
        n, tp = request.accelerators, degrees.tp
        slots: dict[str, dict[int, str]] = defaultdict(dict)  # host -> local index -> free accelerator
        for acc in state.free():
            spec = state.accelerators[acc]
            slots[spec.host][spec.index] = acc
        host_order = [h.id for h in state.fabric.hosts]
        indices = sorted({a.index for a in state.fabric.accelerators})
        best: tuple[tuple[int, ...], Allocation] | None = None
        for k in range(tp, len(indices) + 1, tp):
            if n % k:
                continue
            need = n // k
            for index_set in itertools.combinations(indices, k):
                eligible = [h for h in host_order if all(i in slots[h] for i in index_set)
                            and self._tp_in_domains(state, slots[h], index_set, tp)]
                if len(eligible) < need:
                    continue
                chosen = self._fewest_racks(state, eligible, need)
                racks = len({state.hosts[h].rack for h in chosen})
                rails = k if need > 1 else 0
                key = (racks, rails, need, *index_set)
                if best is not None and key >= best[0]:
                    continue
                allocation = self._ranked(state, chosen, index_set, slots, degrees)
                if allocation is not None:
                    best = (key, allocation)
        if best is None:
            return Unplaceable(f"no set of hosts with the same free local indices holds {n} accelerators "
                               f"with TP={tp} inside a scale-up domain")
        return best[1]

    @staticmethod
    def _tp_in_domains(state: FabricState, free: dict[int, str], index_set: tuple[int, ...], tp: int) -> bool:
        blocks = [index_set[i:i + tp] for i in range(0, len(index_set), tp)]
        return all(len({state.accelerators[free[i]].domain for i in block}) == 1 for block in blocks)

    @staticmethod
    def _fewest_racks(state: FabricState, eligible: list[str], need: int) -> list[str]:
        by_rack: dict[str, list[str]] = defaultdict(list)
        for host in eligible:
            by_rack[state.hosts[host].rack].append(host)
        chosen: list[str] = []
        for rack in sorted(by_rack, key=lambda r: -len(by_rack[r])):  # stable: fabric order among equals
            chosen.extend(by_rack[rack][: need - len(chosen)])
            if len(chosen) == need:
                break
        return chosen

    @staticmethod
    def _ranked(state: FabricState, hosts: list[str], index_set: tuple[int, ...], slots: dict[str, dict[int, str]],
                degrees: Parallelism) -> Allocation | None:
        """Ranks dealt host by host or round robin, whichever keeps DP/PP on their rails; None if neither."""
        tp, per_host = degrees.tp, len(index_set) // degrees.tp
        groups = degrees.size // tp
        probe = {"dp": 1.0, "pp": 1.0}
        for deal in (lambda g: divmod(g, per_host), lambda g: (g % len(hosts), g // len(hosts))):
            ranks = []
            for g in range(groups):
                host, j = deal(g)
                ranks.extend(slots[hosts[host]][index_set[j * tp + t]] for t in range(tp))
            ranked = tuple(ranks)
            if traffic_split(state, ranked, degrees, probe).cross_rail == 0:
                return Allocation(ranked, ocs=_rings(state, hosts, index_set, slots), how="rail-aligned")
        return None


def _rings(state: FabricState, hosts: list[str], index_set: tuple[int, ...],
           slots: dict[str, dict[int, str]]) -> tuple[OcsCircuit, ...]:
    """Per used OCS rail, a ring of circuits over the job's ports (none on one host or on EPS rails)."""
    if len(hosts) < 2:
        return ()
    circuits = []
    for rail in state.fabric.rails:
        if rail.kind != "ocs" or rail.index not in index_set:
            continue
        ports = [state.port_of(rail.id, slots[h][rail.index]) for h in hosts]
        if any(p is None for p in ports):
            continue
        ring = list(zip(ports, ports[1:] + ports[:1], strict=True))
        circuits.extend(OcsCircuit(rail.id, tx, rx) for tx, rx in ring)  # type: ignore[arg-type]
    return tuple(circuits)
