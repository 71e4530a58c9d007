"""Torus geometry over a :class:`~propius.fabric.state.FabricState`: a rack's server grid, aligned slice
shapes, candidate light paths between servers, and the ring bandwidth a slice gets.

Bandwidth model (Morphlux's argument, in link units of the rack's torus link bandwidth): every
accelerator has six torus ports. A slice's logical topology is one ring per dimension longer than 1.

- On fixed wiring a ring in dimension ``d`` can only use ports whose neighbour is in the slice: two
  when the slice spans the rack's whole dimension (the wrap-around link closes the ring), one when it
  spans part of it (a line, each link used both ways), none for a dimension of length 1. A 2×2×1 slice
  keeps one X and one Y port of six.
- On a programmable rack the interposer steers all six ports into circuits inside the slice, and
  each accelerator divides them equally among its rings (bandwidth steering). A 2×2×1 slice gets
  three links per ring, 3× the fixed-wiring injection bandwidth; a whole-rack 4×4×4 slice gains nothing.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass

from propius.fabric.model import Fabric
from propius.fabric.state import FabricState, RingShare

__all__ = ["PORTS", "RackGrid", "aligned_origins", "orientations", "ring_shares", "shortest_paths"]

PORTS = 6
Coord = tuple[int, int, int]
_GRID_CACHE = 64
_GRIDS: OrderedDict[tuple[int, str], tuple[Fabric, RackGrid]] = OrderedDict()
"""(id of a fabric, rack) -> (that fabric, its grid); the fabric is kept so its id cannot be reused while cached."""


@dataclass(frozen=True)
class RackGrid:
    """One torus rack: its dimensions, the server ("brick") shape, and who sits where."""

    rack: str
    dims: Coord
    brick: Coord
    acc_at: dict[Coord, str]
    host_at: dict[Coord, str]
    """Server cell (coordinate // brick) -> host id."""
    programmable: bool
    link_gbps: float

    @property
    def grid(self) -> Coord:
        return (self.dims[0] // self.brick[0], self.dims[1] // self.brick[1], self.dims[2] // self.brick[2])

    @classmethod
    def of(cls, state: FabricState, rack: str) -> RackGrid:
        """The grid of ``rack``; built once per fabric object (a fabric is immutable) and kept in a small cache,
        because placement asks for every rack's grid on every request."""
        key = (id(state.fabric), rack)
        cached = _GRIDS.get(key)
        if cached is not None and cached[0] is state.fabric:
            _GRIDS.move_to_end(key)
            return cached[1]
        grid = cls._build(state, rack)
        _GRIDS[key] = (state.fabric, grid)
        while len(_GRIDS) > _GRID_CACHE:
            _GRIDS.popitem(last=False)
        return grid

    @classmethod
    def _build(cls, state: FabricState, rack: str) -> RackGrid:
        spec = state.racks[rack]
        assert spec.torus is not None, f"rack {rack} has no torus"
        accs = [a for a in state.fabric.accelerators if state.hosts[a.host].rack == rack]
        acc_at = {a.coord: a.id for a in accs if a.coord is not None}
        by_host: dict[str, list[Coord]] = {}
        for a in accs:
            assert a.coord is not None
            by_host.setdefault(a.host, []).append(a.coord)
        first = next(iter(by_host.values()))
        brick = tuple(max(c[i] for c in first) - min(c[i] for c in first) + 1 for i in range(3))
        host_at = {tuple(min(c[i] for c in coords) // brick[i] for i in range(3)): host
                   for host, coords in by_host.items()}
        members = set(acc_at.values())
        link = next((lk.bandwidth_gbps for lk in state.fabric.links if lk.kind == "torus" and lk.a in members), 100.0)
        return cls(rack, spec.torus, brick, acc_at, host_at, spec.programmable, link)  # type: ignore[arg-type]

    def host_accelerators(self, host: str) -> list[str]:
        """The host's accelerators ordered by their offset in the brick."""
        cell = next(c for c, h in self.host_at.items() if h == host)
        offsets = itertools.product(*(range(b) for b in self.brick))
        return [self.acc_at[(cell[0] * self.brick[0] + o[0], cell[1] * self.brick[1] + o[1],
                             cell[2] * self.brick[2] + o[2])] for o in offsets]

    def neighbours(self, state: FabricState) -> dict[str, list[str]]:
        """Host -> hosts it has interposer fibres to."""
        return {h: sorted(state.hosts[h].interposer.fibres) if state.hosts[h].interposer else []  # type: ignore[union-attr]
                for h in self.host_at.values()}


def orientations(shape: Coord, dims: Coord) -> list[Coord]:
    """Distinct axis permutations of ``shape`` that fit in ``dims``, the given orientation first."""
    out: list[Coord] = []
    for perm in itertools.permutations(shape):
        if perm not in out and all(s <= d for s, d in zip(perm, dims, strict=True)):
            out.append(perm)  # type: ignore[arg-type]
    return out


def aligned_origins(shape: Coord, dims: Coord) -> list[Coord]:
    """Origins (multiples of the shape, lexicographic) of the aligned sub-blocks of ``dims``."""
    if any(d % s for s, d in zip(shape, dims, strict=True)):
        return []
    return list(itertools.product(*(range(0, d, s) for s, d in zip(shape, dims, strict=True))))  # type: ignore[arg-type]


def ring_shares(shape: Coord, dims: Coord, link_gbps: float, *, steered: bool) -> tuple[RingShare, ...]:
    """The rings of a slice of ``shape`` in a rack of ``dims`` and the links each gets (module docstring)."""
    axes = [i for i in range(3) if shape[i] > 1]
    shares = []
    for i in axes:
        links = PORTS / len(axes) if steered else (2.0 if shape[i] == dims[i] else 1.0)
        shares.append(RingShare(name="xyz"[i], links=links, bandwidth_gbps=links * link_gbps))
    return tuple(shares)


def shortest_paths(adjacency: dict[str, list[str]], src: str, dst: str, limit: int) -> list[tuple[str, ...]]:
    """Up to ``limit`` shortest paths from ``src`` to ``dst`` (lexicographic among equals)."""
    dist = {src: 0}
    parents: dict[str, list[str]] = {src: []}
    queue = deque([src])
    while queue:
        node = queue.popleft()
        for nxt in adjacency[node]:
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                parents[nxt] = [node]
                queue.append(nxt)
            elif dist[nxt] == dist[node] + 1:
                parents[nxt].append(node)
    if dst not in dist:
        return []
    paths: list[tuple[str, ...]] = []

    def walk(node: str, suffix: tuple[str, ...]) -> None:
        if len(paths) >= limit:
            return
        if node == src:
            paths.append((src, *suffix))
            return
        for parent in sorted(parents[node]):
            walk(parent, (node, *suffix))

    walk(dst, ())
    return paths
