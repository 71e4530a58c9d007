"""Standard fabrics, built in code: torus racks of 4-accelerator servers, and rail-optimized GPU clusters.

Naming: rack ``r{R}``, host ``r{R}-h{H}``, accelerator ``r{R}-h{H}-a{I}`` (``I`` = local index = rail),
rail ``rail{I}``. Shared-risk groups: each host is its own board, hosts alternate between a rack's two
power feeds, and a rack has one ToR.
"""

from __future__ import annotations

import itertools
from typing import Literal

from propius.fabric.model import (
    Accelerator,
    Fabric,
    Host,
    Interposer,
    Link,
    Rack,
    Rail,
    SharedRisk,
    Site,
)

__all__ = ["rail_cluster", "torus_racks"]


def _srg(rack: str, host: str, k: int) -> SharedRisk:
    return SharedRisk(power=f"{rack}-feed{k % 2}", board=host, tor=f"{rack}-tor")


def torus_racks(n_racks: int, x: int = 4, y: int = 4, z: int = 4, *, brick: tuple[int, int, int] = (2, 2, 1),
                fibres: int = 8, programmable: bool = True, link_gbps: float = 100.0) -> Fabric:
    """``n_racks`` racks, each an ``x``×``y``×``z`` torus of accelerators grouped into servers of ``brick``
    shape (Morphlux and TPU v4: 4×4×4 racks of 2×2×1 servers). Programmable racks give every server an
    interposer with ``fibres`` fibres to each neighbouring server (wrap-around included)."""
    dims = (x, y, z)
    if any(d % b for d, b in zip(dims, brick, strict=True)):
        raise ValueError(f"brick {brick} does not tile a {dims} torus")
    grid = tuple(d // b for d, b in zip(dims, brick, strict=True))
    racks, hosts, accs, links = [], [], [], []
    for r in range(n_racks):
        rack = f"r{r}"
        racks.append(Rack(id=rack, site="site0", torus=dims, programmable=programmable))
        cells = list(itertools.product(*(range(g) for g in grid)))
        host_at = {cell: f"{rack}-h{k}" for k, cell in enumerate(cells)}
        acc_at: dict[tuple[int, int, int], str] = {}
        for k, cell in enumerate(cells):
            host = host_at[cell]
            neighbours: dict[str, int] = {}
            for axis in range(3):
                if grid[axis] == 1:
                    continue
                for step in (1, -1):
                    other = list(cell)
                    other[axis] = (cell[axis] + step) % grid[axis]
                    neighbours[host_at[tuple(other)]] = fibres  # type: ignore[index]
            interposer = Interposer(fibres=neighbours) if programmable and neighbours else None
            hosts.append(Host(id=host, rack=rack, srg=_srg(rack, host, k), interposer=interposer))
            offsets = itertools.product(*(range(b) for b in brick))
            for i, off in enumerate(offsets):
                coord = (cell[0] * brick[0] + off[0], cell[1] * brick[1] + off[1], cell[2] * brick[2] + off[2])
                acc = f"{host}-a{i}"
                acc_at[coord] = acc
                accs.append(Accelerator(id=acc, host=host, index=i, domain=rack, coord=coord))
        for coord, acc in acc_at.items():
            for axis in range(3):
                if dims[axis] == 1:
                    continue
                nxt = list(coord)
                nxt[axis] = (coord[axis] + 1) % dims[axis]
                links.append(Link(kind="torus", a=acc, b=acc_at[tuple(nxt)], bandwidth_gbps=link_gbps,  # type: ignore[index]
                                  direction=f"+{'xyz'[axis]}", wrap=coord[axis] + 1 == dims[axis]))  # type: ignore[arg-type]
    return Fabric(sites=[Site(id="site0")], racks=racks, hosts=hosts, accelerators=accs, links=links)


def rail_cluster(hosts: int, gpus_per_host: int = 8, *, rail_kind: Literal["eps", "ocs"] = "eps",
                 hosts_per_rack: int = 4, scale_up_gbps: float = 900.0, rail_gbps: float = 400.0) -> Fabric:
    """A rail-optimized cluster: ``hosts`` servers of ``gpus_per_host`` GPUs (one scale-up domain per
    host), GPU ``i`` of every host on rail ``i``; OCS rails have one port per host (port = host number)."""
    racks, host_list, accs, links = [], [], [], []
    for h in range(hosts):
        rack = f"r{h // hosts_per_rack}"
        if not racks or racks[-1].id != rack:
            racks.append(Rack(id=rack, site="site0"))
        host = f"{rack}-h{h}"
        host_list.append(Host(id=host, rack=rack, srg=_srg(rack, host, h)))
        ids = [f"{host}-a{i}" for i in range(gpus_per_host)]
        accs.extend(Accelerator(id=acc, host=host, index=i, domain=host) for i, acc in enumerate(ids))
        links.extend(Link(kind="scale-up", a=a, b=b, bandwidth_gbps=scale_up_gbps, latency_us=0.5)
                     for a, b in itertools.combinations(ids, 2))
        links.extend(Link(kind="nic-rail", a=acc, b=f"rail{i}", bandwidth_gbps=rail_gbps, latency_us=2.0)
                     for i, acc in enumerate(ids))
    rails = [Rail(id=f"rail{i}", index=i, kind=rail_kind, bandwidth_gbps=rail_gbps,
                  radix=hosts if rail_kind == "ocs" else None,
                  ports={n: f"{h.id}-a{i}" for n, h in enumerate(host_list)} if rail_kind == "ocs" else {})
             for i in range(gpus_per_host)]
    return Fabric(sites=[Site(id="site0")], racks=racks, hosts=host_list, accelerators=accs, links=links, rails=rails)

