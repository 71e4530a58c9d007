"""Where a placed job's communication goes: scale-up, one rail, or across rails.

Collectives of a cross-host group run hierarchically, as NCCL does on rail-optimized fabrics: each
member's share leaves its host on its own rail and meets the members of the other hosts that sit at the
same local index. A member whose local index is missing on another host of its group has no same-rail
partner there, so its share crosses rails (through a spine, or a forwarding GPU). A group on one host
stays in its scale-up domain. Volumes per iteration and member: ring AllReduce ``2(n-1)/n · bytes`` for
DP and TP groups, ``2 · bytes`` (activations forward, gradients back) per pipeline stage for PP.
"""

from __future__ import annotations

from dataclasses import dataclass

from propius.fabric.request import Parallelism
from propius.fabric.state import FabricState

__all__ = ["TrafficSplit", "traffic_split"]


@dataclass(frozen=True)
class TrafficSplit:
    """Bytes per iteration by path; ``tp_off_scale_up``: TP bytes that left a scale-up domain."""

    scale_up: float = 0.0
    same_rail: float = 0.0
    cross_rail: float = 0.0
    tp_off_scale_up: float = 0.0

    def __add__(self, other: TrafficSplit) -> TrafficSplit:
        return TrafficSplit(self.scale_up + other.scale_up, self.same_rail + other.same_rail,
                            self.cross_rail + other.cross_rail, self.tp_off_scale_up + other.tp_off_scale_up)


def traffic_split(state: FabricState, ranks: tuple[str, ...], degrees: Parallelism,
                  bytes_per_kind: dict[str, float]) -> TrafficSplit:
    """Split one iteration's bytes of a job placed as ``ranks`` (accelerator per rank) by path."""
    total = TrafficSplit()
    for kind, groups in degrees.groups().items():
        size = bytes_per_kind.get(kind, 0.0)
        for group in groups:
            n = len(group)
            per_member = 2 * size if kind == "pp" else 2 * (n - 1) / n * size
            accs = [state.accelerators[ranks[r]] for r in group]
            domains = {a.domain for a in accs}
            hosts: dict[str, set[int]] = {}
            for a in accs:
                hosts.setdefault(a.host, set()).add(a.index)
            if len(hosts) == 1 and len(domains) == 1:
                total += TrafficSplit(scale_up=per_member * n)
                continue
            common = set.intersection(*hosts.values())
            same = sum(per_member for a in accs if a.index in common)
            cross = per_member * n - same
            off = per_member * n if kind == "tp" else 0.0
            total += TrafficSplit(same_rail=same, cross_rail=cross, tp_off_scale_up=off)
    return total
