"""Torus slices on racks of servers, contiguous first, fragmented on programmable racks (Morphlux, Vijaya
Kumar, Ding et al., ASPLOS'26).

1. **Contiguous first-fit.** The requested shape (or, for a bare count, the standard shape holding it:
   2×2×1, 2×2×2, 2×2×4, 2×4×4, 4×4×4), in each orientation that fits, at aligned origins (multiples of
   the shape), racks in order: the first block whose accelerators are all free.
2. **Fragmented** (``fragmented=True``, programmable racks only, server-aligned shapes). The slice is
   seen at server granularity: logical slots, and adjacencies between neighbouring slots (a ring per
   dimension). Each slot goes to a distinct free server of one rack; each adjacency becomes a light
   path through the interposers between the two servers (one of a few shortest paths), using as many
   fibres as the slot faces have links. Objective: the smallest worst fibre load over the rack's edges,
   never above an edge's fibre count. Solved as a MILP with SciPy's HiGHS (``scipy.optimize.milp``,
   imported lazily) within ``time_budget_s``; a greedy placement (slots in breadth-first order, each on
   the free server adding the least load, each adjacency on its least-loaded path) is the incumbent and
   the fallback when SciPy is missing or the budget runs out without a better solution.
3. **Bandwidth steering.** On a programmable rack each accelerator's six ports are split equally among
   the slice's rings; on fixed wiring a ring has only the ports whose neighbour is in the slice
   (:func:`propius.fabric.torus.ring_shares`).

Contiguous slices on programmable racks record their adjacencies too, as one-hop paths, so fibre loads
count every circuit; a free block whose one-hop paths do not fit (another slice's light paths pass between
its servers) is skipped like a busy one.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass

from policies.placement.base import Allocation, Placement, Unplaceable
from propius.fabric.request import CloudRequest
from propius.fabric.state import FabricState, FibreCircuit
from propius.fabric.torus import RackGrid, aligned_origins, orientations, ring_shares, shortest_paths

STANDARD_SHAPES: dict[int, tuple[int, int, int]] = {
    1: (1, 1, 1), 2: (2, 1, 1), 4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4)}
PATHS_PER_PAIR = 3

Coord = tuple[int, int, int]


@dataclass(frozen=True)
class _Slots:
    """A slice at server granularity: slot cells, adjacencies (slot pairs) and their fibre widths."""

    cells: list[Coord]
    adjacencies: list[tuple[int, int, int]]  # (slot a, slot b, width)


class TorusPlacement(Placement):
    name = "torus"

    def __init__(self, fragmented: bool = True, time_budget_s: float = 1.0) -> None:
        self.fragmented = fragmented
        self.time_budget_s = time_budget_s

    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        shape = request.shape or STANDARD_SHAPES.get(request.accelerators)
        if shape is None:
            return Unplaceable(f"no standard torus shape holds {request.accelerators} accelerators; give 'shape'")
        grids = [RackGrid.of(state, r.id) for r in state.fabric.racks if r.torus is not None]
        if not grids:
            return Unplaceable("the fabric has no torus rack")
        free = set(state.free())
        for grid in grids:
            found = self._contiguous(state, grid, shape, free)
            if found is not None:
                return found
        if not self.fragmented:
            return Unplaceable(f"no aligned free {'x'.join(map(str, shape))} block (contiguous only)")
        best: Allocation | None = None
        for grid in grids:
            if not grid.programmable:
                continue
            found = self._fragmented(state, grid, shape, free)
            if found is not None and (best is None or _worst(state, found) < _worst(state, best)):
                best = found
        if best is None:
            return Unplaceable(f"no aligned free {'x'.join(map(str, shape))} block, and no programmable rack has "
                               f"enough free servers within its fibre counts")
        return best

    # ---- contiguous ----
    def _contiguous(self, state: FabricState, grid: RackGrid, shape: Coord, free: set[str]) -> Allocation | None:
        return next(self.contiguous_blocks(state, grid, shape, free), None)

    def contiguous_blocks(self, state: FabricState, grid: RackGrid, shape: Coord,
                          free: set[str]) -> Iterator[Allocation]:
        """Every aligned free block of ``shape`` in this rack whose circuits fit, in first-fit order."""
        for oriented in orientations(shape, grid.dims):
            for origin in aligned_origins(oriented, grid.dims):
                coords = [tuple(o + d for o, d in zip(origin, delta, strict=True))
                          for delta in itertools.product(*(range(s) for s in oriented))]
                accs = tuple(grid.acc_at[c] for c in coords)  # type: ignore[index]
                if all(a in free for a in accs):
                    fibre = self._direct_circuits(state, grid, origin, oriented) if grid.programmable else ()
                    if fibre and not _fits(state, fibre):  # another slice's light paths pass through here
                        continue
                    yield Allocation(accs, fibre=fibre,
                                     rings=ring_shares(oriented, grid.dims, grid.link_gbps, steered=grid.programmable),
                                     how=f"contiguous {'x'.join(map(str, oriented))} at {origin} in {grid.rack}")

    def _direct_circuits(self, state: FabricState, grid: RackGrid, origin: Coord,
                         shape: Coord) -> tuple[FibreCircuit, ...]:
        slots = _slots(shape, grid)
        if slots is None:
            return ()
        base = tuple(o // b for o, b in zip(origin, grid.brick, strict=True))
        hosts = [grid.host_at[tuple(b + c for b, c in zip(base, cell, strict=True))]  # type: ignore[index]
                 for cell in slots.cells]
        return tuple(FibreCircuit((hosts[a], hosts[b]), width) for a, b, width in slots.adjacencies)

    # ---- fragmented ----
    def _fragmented(self, state: FabricState, grid: RackGrid, shape: Coord, free: set[str]) -> Allocation | None:
        problem = fragment_problem(state, grid, shape, free)
        if problem is None:
            return None
        slots, servers, paths = problem
        greedy = _greedy(state, slots, servers, paths)
        floor = max(max(state.edge_loads().values(), default=0), max(w for *_, w in slots.adjacencies))
        optimal = greedy is not None and _load(state, greedy[1]) <= floor
        solved = None if optimal else _milp(state, slots, servers, paths, self.time_budget_s, greedy)
        chosen = solved or greedy
        if chosen is None:
            return None
        hosts, circuits = chosen
        accs: list[str] = []
        for delta in itertools.product(*(range(s) for s in shape)):
            cell = tuple(d // b for d, b in zip(delta, grid.brick, strict=True))
            offset = tuple(d % b for d, b in zip(delta, grid.brick, strict=True))
            host = hosts[slots.cells.index(cell)]  # type: ignore[arg-type]
            within = list(itertools.product(*(range(b) for b in grid.brick))).index(offset)
            accs.append(grid.host_accelerators(host)[within])
        return Allocation(tuple(accs), fibre=circuits,
                          rings=ring_shares(shape, grid.dims, grid.link_gbps, steered=True),
                          how=f"fragmented {'x'.join(map(str, shape))} over {len(hosts)} servers of {grid.rack}"
                              + (" (MILP)" if solved else " (greedy)"))


Paths = dict[tuple[str, str], list[tuple[str, ...]]]
Solution = tuple[list[str], tuple[FibreCircuit, ...]]


def fragment_problem(state: FabricState, grid: RackGrid, shape: Coord,
                     free: set[str]) -> tuple[_Slots, list[str], Paths] | None:
    """A fragmented placement's inputs in this rack: the slice's server-level slots, the rack's free servers,
    and the candidate light paths between each pair of them; None when none can exist (the shape is not made
    of whole servers, is one server, or the rack has too few free servers)."""
    slots = _slots(shape, grid)
    if slots is None or not slots.adjacencies:
        return None
    servers = [h for h in grid.host_at.values() if all(a in free for a in grid.host_accelerators(h))]
    if len(servers) < len(slots.cells):
        return None
    adjacency = grid.neighbours(state)
    paths = {(u, v): shortest_paths(adjacency, u, v, PATHS_PER_PAIR) for u in servers for v in servers if u != v}
    return slots, servers, paths


def _slots(shape: Coord, grid: RackGrid) -> _Slots | None:
    """The slice's server-level slots and adjacencies; None unless the shape is made of whole servers."""
    if any(s % b for s, b in zip(shape, grid.brick, strict=True)):
        return None
    sizes = tuple(s // b for s, b in zip(shape, grid.brick, strict=True))
    cells: list[Coord] = list(itertools.product(*(range(n) for n in sizes)))  # type: ignore[arg-type]
    adjacencies: set[tuple[int, int, int]] = set()
    for i, cell in enumerate(cells):
        for axis in range(3):
            if sizes[axis] == 1:
                continue
            nxt = list(cell)
            nxt[axis] = (cell[axis] + 1) % sizes[axis]
            j = cells.index(tuple(nxt))  # type: ignore[arg-type]
            face = math.prod(grid.brick) // grid.brick[axis]
            width = face * (2 if sizes[axis] == 2 else 1)  # a ring of two servers: both links join the same pair
            adjacencies.add((min(i, j), max(i, j), width))
    return _Slots(cells, sorted(adjacencies))


def _worst(state: FabricState, allocation: Allocation) -> int:
    load = Counter(state.edge_loads())
    for circuit in allocation.fibre:
        for edge in circuit.edges():
            load[edge] += circuit.width
    return max(load.values(), default=0)


def _greedy(state: FabricState, slots: _Slots, servers: list[str], paths: Paths) -> Solution | None:
    """Slots in breadth-first order; each on the free server that adds the least worst load."""
    neighbours: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(slots.cells))}
    for a, b, width in slots.adjacencies:
        neighbours[a].append((b, width))
        neighbours[b].append((a, width))
    order, queue, seen = [], deque([0]), {0}
    while queue:
        slot = queue.popleft()
        order.append(slot)
        for other, _ in neighbours[slot]:
            if other not in seen:
                seen.add(other)
                queue.append(other)
    load = Counter(state.edge_loads())
    placed: dict[int, str] = {}
    circuits: list[FibreCircuit] = []
    for slot in order:
        best: tuple[tuple[int, int, int], str, list[FibreCircuit]] | None = None
        for server in servers:
            if server in placed.values():
                continue
            trial, added, hops = Counter(load), [], 0
            for other, width in neighbours[slot]:
                if other not in placed:
                    continue
                options = paths.get((server, placed[other]), [])
                if not options:
                    break
                path = min(options, key=lambda p: max(trial[e] for e in FibreCircuit(p, width).edges()))
                circuit = FibreCircuit(path, width)
                for edge in circuit.edges():
                    trial[edge] += width
                added.append(circuit)
                hops += len(path) - 1
            else:
                worst = max((trial[e] - state.fibres[e] for e in trial if trial[e]), default=-1)
                key = (max(worst, -1), hops, servers.index(server))
                if worst <= 0 and (best is None or key < best[0]):
                    best = (key, server, added)
        if best is None:
            return None
        _, server, added = best
        placed[slot] = server
        circuits.extend(added)
        for circuit in added:
            for edge in circuit.edges():
                load[edge] += circuit.width
    return [placed[i] for i in range(len(slots.cells))], tuple(circuits)


def _milp(state: FabricState, slots: _Slots, servers: list[str], paths: Paths, budget_s: float,
          incumbent: Solution | None) -> Solution | None:
    """The fragmented placement as a MILP (module docstring); None without SciPy, a solution, or a better one."""
    try:
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import lil_matrix
    except ImportError:
        return None
    n_slots, n_servers = len(slots.cells), len(servers)
    x_index = {(s, q): s * n_slots + q for s in range(n_servers) for q in range(n_slots)}
    y_vars: list[tuple[int, int, int, tuple[str, ...], int]] = []  # (adjacency, u, v, path, width)
    for a, (qa, qb, width) in enumerate(slots.adjacencies):
        del qa, qb
        for u, v in itertools.permutations(range(n_servers), 2):
            for path in paths.get((servers[u], servers[v]), []):
                y_vars.append((a, u, v, path, width))
    n_x, n_y = len(x_index), len(y_vars)
    n_vars = n_x + n_y + 1  # the last variable is the worst load L
    existing = Counter(state.edge_loads())
    edges = sorted({e for *_, path, _w in y_vars for e in FibreCircuit(path, 1).edges()}, key=sorted)
    edge_row = {e: i for i, e in enumerate(edges)}
    rows = n_slots + n_servers + 2 * len(slots.adjacencies) * n_servers + 2 * len(edges)
    A = lil_matrix((rows, n_vars))
    lo, hi = np.zeros(rows), np.zeros(rows)
    r = 0
    for q in range(n_slots):  # every slot on exactly one server
        for s in range(n_servers):
            A[r, x_index[(s, q)]] = 1
        lo[r] = hi[r] = 1
        r += 1
    for s in range(n_servers):  # every server at most one slot
        for q in range(n_slots):
            A[r, x_index[(s, q)]] = 1
        lo[r], hi[r] = 0, 1
        r += 1
    ends = {}
    for k, (a, u, v, _path, _w) in enumerate(y_vars):
        ends.setdefault((a, "u", u), []).append(k)
        ends.setdefault((a, "v", v), []).append(k)
    for a, (qa, qb, _w) in enumerate(slots.adjacencies):  # adjacency a runs from qa's server to qb's
        for s in range(n_servers):
            for side, slot in (("u", qa), ("v", qb)):
                for k in ends.get((a, side, s), []):
                    A[r, n_x + k] = 1
                A[r, x_index[(s, slot)]] = -1
                lo[r] = hi[r] = 0
                r += 1
    for k, (_a, _u, _v, path, width) in enumerate(y_vars):
        for e in FibreCircuit(path, 1).edges():
            A[r + edge_row[e], n_x + k] += width
            A[r + len(edges) + edge_row[e], n_x + k] += width
    for e, i in edge_row.items():
        A[r + i, n_vars - 1] = -1  # existing + load <= L
        lo[r + i], hi[r + i] = -np.inf, -existing[e]
        lo[r + len(edges) + i], hi[r + len(edges) + i] = -np.inf, state.fibres[e] - existing[e]  # <= fibres
    cost = np.zeros(n_vars)
    cost[-1] = 1.0
    integrality = np.ones(n_vars)
    integrality[-1] = 0
    upper = np.ones(n_vars)
    upper[-1] = np.inf
    result = milp(cost, constraints=LinearConstraint(A.tocsr(), lo, hi), integrality=integrality,
                  bounds=Bounds(np.zeros(n_vars), upper), options={"time_limit": budget_s})
    if result.x is None:
        return None
    values = np.round(result.x).astype(int)
    hosts = [servers[next(s for s in range(n_servers) if values[x_index[(s, q)]])] for q in range(n_slots)]
    circuits = tuple(FibreCircuit(path, width) for k, (_a, _u, _v, path, width) in enumerate(y_vars) if values[n_x + k])
    if incumbent is not None and _load(state, circuits) >= _load(state, incumbent[1]):
        return None
    return hosts, circuits


def _fits(state: FabricState, circuits: tuple[FibreCircuit, ...]) -> bool:
    """Whether the circuits fit in the fibres their edges have left."""
    added: Counter[frozenset[str]] = Counter()
    for circuit in circuits:
        for edge in circuit.edges():
            added[edge] += circuit.width
    return all(state.edge_load(*edge) + n <= state.fibres.get(edge, 0) for edge, n in added.items())


def _load(state: FabricState, circuits: tuple[FibreCircuit, ...]) -> int:
    load = Counter(state.edge_loads())
    for circuit in circuits:
        for edge in circuit.edges():
            load[edge] += circuit.width
    return max(load.values(), default=0)
