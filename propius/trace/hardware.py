"""A cloud job's CCL-Bench hardware section, read from the fabric it was placed on instead of left null.

What the card asks and where it comes from:

- ``network_topo.topology``: "3D torus 4x4x4 (programmable); 2x4x4 slice" (the rack's torus, and the
  slice's shape, or "32 chips over 8 non-contiguous servers" for a fragmented one) or "rail-optimized,
  8 rails (8 eps)" (the rails the allocation's NICs attach to, by kind); "scale-up only" otherwise.
- ``network_topo.bandwidth_gbps`` = ``[scale_out, scale_up]`` per accelerator. Scale-up: on a torus, the
  allocation's injection bandwidth over its rings (what steering gives it; without ring shares, its torus
  links to other members); otherwise the slowest scale-up link touching its accelerators. Scale-out: the
  slowest NIC→rail link of its accelerators; null on a torus rack, whose fabric file models nothing that
  leaves the rack.
- ``xpu_spec``: ``total_count`` = the allocation's accelerators; ``count_per_node`` = the most it holds on
  one host. The fabric file does not name the chip, so ``type`` and ``model`` are the caller's to give.
"""

from __future__ import annotations

from collections import Counter

from propius.fabric import Allocation, Fabric, FabricError, Rack
from propius.trace.card import Hardware, NetworkTopology, XpuSpec

__all__ = ["hardware_from_fabric"]


def hardware_from_fabric(fabric: Fabric, allocation: Allocation, *, xpu_type: str = "accelerator",
                         xpu_model: str = "unnamed in the fabric file") -> Hardware:
    """The card's hardware section for ``allocation`` on ``fabric`` (module docstring); FabricError if the
    allocation names an accelerator the fabric does not have."""
    accs = {a.id: a for a in fabric.accelerators}
    unknown = [a for a in allocation.accelerators if a not in accs]
    if unknown:
        raise FabricError(f"accelerator {unknown[0]!r}", "is not in the fabric")
    held = set(allocation.accelerators)
    rack_of = {h.id: h.rack for h in fabric.hosts}
    racks = {r.id: r for r in fabric.racks}
    used_racks = sorted({rack_of[accs[a].host] for a in held})
    tori = [racks[r] for r in used_racks if racks[r].torus is not None]
    per_host = Counter(accs[a].host for a in held)

    nic = [lk for lk in fabric.links if lk.kind == "nic-rail" and lk.a in held]
    scale_up = [lk for lk in fabric.links if lk.kind == "scale-up" and (lk.a in held or lk.b in held)]
    scale_out = min((lk.bandwidth_gbps for lk in nic), default=None)
    if tori:
        up: float | None = allocation.bandwidth_gbps or _torus_links_gbps(fabric, held)
        topology = _torus_topology(fabric, tori, held, per_host)
    else:
        up = min((lk.bandwidth_gbps for lk in scale_up), default=None)
        topology = _rail_topology(fabric, {lk.b for lk in nic}) if nic else "scale-up only"
    return Hardware(network_topo=NetworkTopology(topology=topology, bandwidth_gbps=[scale_out, up or None]),
                    xpu_spec=XpuSpec(type=xpu_type, model=xpu_model, total_count=len(held),
                                     count_per_node=max(per_host.values(), default=0)),
                    driver_version=None)


def _torus_links_gbps(fabric: Fabric, held: set[str]) -> float:
    """Mean over members of the torus link bandwidth joining each to other members (fixed wiring)."""
    total = sum(2 * lk.bandwidth_gbps for lk in fabric.links if lk.kind == "torus" and lk.a in held and lk.b in held)
    return total / len(held) if held else 0.0


def _torus_topology(fabric: Fabric, tori: list[Rack], held: set[str], per_host: Counter[str]) -> str:
    """The rack's torus, and the slice: its shape when its chips fill their bounding box (contiguous), else
    how many servers it is spread over."""
    dims = sorted({"x".join(map(str, r.torus)) for r in tori if r.torus is not None})
    wiring = "programmable" if all(r.programmable for r in tori) else "fixed wiring"
    text = f"3D torus {'/'.join(dims)} ({wiring}" + (f", {len(tori)} racks)" if len(tori) > 1 else ")")
    coords = [a.coord for a in fabric.accelerators if a.id in held and a.coord is not None]
    if len(tori) == 1 and len(coords) == len(held):
        box = [max(c[i] for c in coords) - min(c[i] for c in coords) + 1 for i in range(3)]
        if box[0] * box[1] * box[2] == len(held):
            return text + f"; {'x'.join(map(str, box))} slice"
    return text + f"; {len(held)} chips over {len(per_host)} non-contiguous servers"


def _rail_topology(fabric: Fabric, rail_ids: set[str]) -> str:
    rails = [r for r in fabric.rails if r.id in rail_ids]
    kinds = Counter(r.kind for r in rails)
    return f"rail-optimized, {len(rails)} rails ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})"
