"""Fabric-aware placement, measured with the placement plug-ins themselves (seeded, discrete-event).

1. **allocation** (Morphlux's setting): Poisson arrivals of torus slices on 4×4×4 racks of 2×2×1 servers,
   in two mixes (``MIXES``: ``tpu-v4``, 30 % sub-rack by count as in the public TPU v4 slice distribution;
   ``sub-rack``, the sub-rack shapes alone), exponential service times, offered load ``LOAD``, served
   first-pending-that-fits. Contiguous-only (fixed wiring) vs random scatter (fixed wiring, a
   packet-switched analogue) vs ours (programmable racks: contiguous, then fragmented, then bandwidth
   steering). Per shape: share queued at arrival, queueing delay, AllReduce bandwidth per accelerator;
   overall: fragmentation (time-averaged share of free accelerators that no placement of the next request
   would use: the head of the queue, or the next arrival when none waits), utilisation, JCT p50/p95. And the 32-chip
   counterfactual (:class:`Counterfactual`): at every arrival of the contiguous-only run, would a 2×4×4
   be placed there, and, where it is rejected though a rack has 32 free chips, does ours place it on the
   very same allocations over programmable racks?
2. **rails**: rail-aligned vs first-fit on a 32×8-GPU rail cluster under churn: cross-rail bytes per
   iteration and the predicted communication time per iteration (α-β, the fabric's link bandwidths).
3. **failures**: a year of seeded chip and board failures on racks full of jobs; in-rack optical swap
   (4 spares / 64) vs electrical degraded swap (4 spares / 64) vs migration (one empty rack per pod)
   vs no spares (wait for the repair). Goodput lost per failure over ``HORIZON_H`` after it. A variant of
   the optical swap lends the spares to one-chip preemptible jobs (:class:`PreemptibleWork`) between
   failures: the share of spare-hours they use and the preemptions per failure.

Writes ``results/fabric.json`` and ``results/fabric.png``; prints markdown tables beside the papers'
anchors.

    python benchmarks/fabric.py                        # the default run (4 racks, 400 jobs)
    python benchmarks/fabric.py --racks 8 --jobs 800   # larger
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from policies.placement import FirstFitPlacement, Placement, RailAlignedPlacement, TorusPlacement  # noqa: E402
from policies.placement.torus import _greedy, fragment_problem  # noqa: E402
from propius.fabric import AcceleratorState, Allocation, CloudRequest, FabricState, Unplaceable  # noqa: E402
from propius.fabric.generators import rail_cluster, torus_racks  # noqa: E402
from propius.fabric.recovery import RecoveryParams, recover  # noqa: E402
from propius.fabric.request import Parallelism  # noqa: E402
from propius.fabric.spares import FailureRates  # noqa: E402
from propius.fabric.state import RingShare  # noqa: E402
from propius.fabric.torus import PORTS, RackGrid, ring_shares  # noqa: E402

RESULTS = Path(__file__).parent / "results"
Shape = tuple[int, int, int]
SUB_RACK = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4))
WHOLE_RACK: Shape = (4, 4, 4)
MIXES: dict[str, dict[Shape, float]] = {
    "tpu-v4": {**{s: 0.30 / len(SUB_RACK) for s in SUB_RACK}, WHOLE_RACK: 0.70},
    "sub-rack": {s: 1 / len(SUB_RACK) for s in SUB_RACK},
}
"""Slice shape -> share of requests by count. ``tpu-v4``: 30 % sub-rack (the public TPU v4 distribution's
sub-rack share; the even split among the sub-rack shapes is ours), 70 % whole racks. ``sub-rack``: the
sub-rack shapes alone, evenly: racks that serve the small tenants while whole-rack and larger slices go to
racks of their own (our assumption, the setting where fragmentation matters)."""
SHAPES: tuple[Shape, ...] = (*SUB_RACK, WHOLE_RACK)
PROBE: Shape = (2, 4, 4)
"""The counterfactual request: a 32-accelerator slice, asked at every arrival of the contiguous-only run."""
LOAD = 0.9
"""Offered load: arrival rate × mean slice size × mean service time / capacity."""
COMM_SHARE = 0.3
"""Share of a job's run time spent in AllReduce when its slice gets the steered bandwidth of its shape."""
HORIZON_H = 24.0
"""Goodput lost by a failure is counted over this many hours after it."""
POLICIES = ("contiguous only", "random scatter", "ours")
ANCHORS = {"morphlux_bandwidth_gain": 0.66, "morphlux_fragmentation_cut": 0.70,
           "morphlux_32_chip_rejected_by_baselines": 0.75, "morphlux_in_rack_share": 0.95,
           "lumion_post_recovery_vs_electrical": 2.0, "small_slice_raw_injection_gain": 3.0}


class RandomScatter(Placement):
    """The packet-switched analogue: random free accelerators in one rack (any rack that has enough). Its
    ring's consecutive members are on average ``h`` torus hops apart, so each of an accelerator's six
    ports carries its traffic over ``h`` links: per-accelerator bandwidth ``6 / h`` links."""

    name = "random-scatter"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        n = request.accelerators
        by_rack: dict[str, list[str]] = {}
        for acc in state.free():
            by_rack.setdefault(state.rack_of(acc), []).append(acc)
        racks = [r for r, accs in by_rack.items() if len(accs) >= n]
        if not racks:
            return Unplaceable("no rack has enough free accelerators")
        rack = self.rng.choice(racks)
        chosen = self.rng.sample(by_rack[rack], n)
        if n == 1:
            return Allocation(tuple(chosen), how="random scatter")
        dims = state.racks[rack].torus
        assert dims is not None

        def hops(a: str, b: str) -> int:
            ca, cb = state.accelerators[a].coord, state.accelerators[b].coord
            assert ca is not None and cb is not None
            return sum(min(abs(x - y), d - abs(x - y)) for x, y, d in zip(ca, cb, dims, strict=True))

        mean = statistics.mean(hops(a, b) for a, b in zip(chosen, chosen[1:] + chosen[:1], strict=True))
        link = RackGrid.of(state, rack).link_gbps
        return Allocation(tuple(chosen), rings=(RingShare("ring", PORTS / mean, PORTS / mean * link),),
                          how="random scatter")


_CONTIGUOUS = TorusPlacement(fragmented=False)


def hostable(policy: str, state: FabricState, grid: RackGrid, shape: Shape, free: set[str]) -> set[str]:
    """The free accelerators of this rack that some placement of ``shape`` by ``policy`` would use now. Random
    scatter: every free one, when the rack has enough. Contiguous-only: those inside an aligned free block.
    Ours: those, and the accelerators of every free server that a fragmented placement within the fibre
    counts can start from (the greedy one, each server tried as the first slot: a lower bound on what the
    MILP finds, so our fragmentation is if anything overstated)."""
    in_rack = {a for a in grid.acc_at.values() if a in free}
    if policy == "random scatter":
        return in_rack if len(in_rack) >= math.prod(shape) else set()
    usable = {a for block in _CONTIGUOUS.contiguous_blocks(state, grid, shape, free) for a in block.accelerators}
    if policy == "contiguous only" or not grid.programmable or len(in_rack) < math.prod(shape):
        return usable
    problem = fragment_problem(state, grid, shape, free)
    if problem is None:
        return usable
    slots, servers, paths = problem
    in_some: set[str] = set()
    for first in servers:  # the greedy puts its first slot on the first server it is given
        if first in in_some:
            continue
        found = _greedy(state, slots, [first, *(h for h in servers if h != first)], paths)
        if found is not None:
            in_some.update(found[0])
    return usable | {a for h in in_some for a in grid.host_accelerators(h)}


FRAGMENTATION = {"all": "fragmentation", "sub": "fragmentation_sub_rack", "all_stranded": "stranded",
                 "sub_stranded": "stranded_sub_rack"}
"""Time-averaged shares of free chips that no placement of the next request (``all``) or of the next sub-rack
request (``sub``) would use; ``stranded``: the part of those in racks that have at least as many free chips
as it asks (held back by shape or fibres, not by count)."""


def unusable(policy: str, state: FabricState, grids: list[RackGrid], shape: Shape, free: set[str]) -> tuple[int, int]:
    """Free chips that no placement of ``shape`` would use, and of those, chips in racks with enough of them."""
    stuck = stranded = 0
    for grid in grids:
        here = sum(a in free for a in grid.acc_at.values())
        if here:
            left = here - len(hostable(policy, state, grid, shape, free))
            stuck += left
            stranded += left if here >= math.prod(shape) else 0
    return stuck, stranded


def _name(shape: Shape) -> str:
    return "x".join(map(str, shape))


def _arrivals(mix: dict[Shape, float], racks: int, jobs: int, seed: int,
              load: float) -> list[tuple[float, Shape, float]]:
    rng = random.Random(seed)
    shapes, weights = list(mix), list(mix.values())
    mean_size = sum(math.prod(s) * w for s, w in mix.items())
    rate = load * racks * 64 / mean_size  # per mean service time (1 h)
    out, t = [], 0.0
    for _ in range(jobs):
        t += rng.expovariate(rate)
        out.append((t, rng.choices(shapes, weights)[0], rng.expovariate(1.0)))
    return out


@dataclass
class Counterfactual:
    """Ours on the contiguous-only run's own states (the ``twin``: programmable racks holding exactly what
    contiguous-only holds). The 32-chip question: at every arrival (Poisson arrivals see time averages),
    could a 2×4×4 be placed contiguously, and when not, though some rack has ≥ 32 free chips, does ours
    place it on the very same allocations? And fragmentation on the same states: the share of free chips in
    racks that cannot host the next request (``ours_area``, time-integrated as the run's own measure)."""

    probes: int = 0
    room: int = 0
    """Probes with ≥ 32 free chips in some rack."""
    contiguous: int = 0
    """Of those, placed by contiguous-only."""
    served: int = 0
    """Of the rest (rejected with room), placed by ours: always fragmented."""
    by_milp: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    """Why ours could not place the rest."""
    ours_area: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FRAGMENTATION, 0.0))
    ours_at_arrival: list[float] = field(default_factory=list)
    """At each arrival that finds free chips: the share of them no placement of the arriving request by ours
    would use, on the twin."""

    def ask(self, state: FabricState, twin: FabricState, contiguous: Placement, ours: Placement) -> None:
        self.probes += 1
        free = Counter(state.rack_of(a) for a in state.free())
        if max(free.values(), default=0) < math.prod(PROBE):
            return
        self.room += 1
        request = CloudRequest(count=math.prod(PROBE), shape=PROBE)
        if isinstance(contiguous.place(request, state), Allocation):
            self.contiguous += 1
            return
        found = ours.place(request, twin)
        if isinstance(found, Allocation):
            assert found.how.startswith("fragmented"), found.how
            self.served += 1
            self.by_milp += "(MILP)" in found.how
        else:
            self.reasons[found.reason] = self.reasons.get(found.reason, 0) + 1

    def summary(self, contiguous: dict[str, Any], duration: float) -> dict[str, Any]:
        rejected = self.room - self.contiguous
        same = {"contiguous only": {name: contiguous[name] for name in FRAGMENTATION.values()},
                "ours": {name: self.ours_area[key] / duration for key, name in FRAGMENTATION.items()}}
        same["ours"]["at_arrival"] = _mean(self.ours_at_arrival)
        same["contiguous only"]["at_arrival"] = contiguous["fragmentation_at_arrival"]
        return {"fragmentation_same_states": same,
                "probes": self.probes, "rack_with_32_free": self.room, "contiguous_placed": self.contiguous,
                "contiguous_rejected_with_room": rejected, "ours_served": self.served,
                "ours_served_by_milp": self.by_milp,
                "ours_served_share": self.served / rejected if rejected else None,
                "contiguous_rejected_share_with_room": rejected / self.room if self.room else None,
                "ours_not_served_reasons": self.reasons}


def allocation_experiment(mix: dict[Shape, float], racks: int, jobs: int, seed: int, *, load: float = LOAD,
                          bandwidth_effect: bool = True) -> dict[str, Any]:
    """One mix under the three policies. ``bandwidth_effect=False``: every job runs its service time whatever
    bandwidth it got, so the policies' runs differ by placement alone."""
    arrivals = _arrivals(mix, racks, jobs, seed, load)
    capacity = racks * 64
    policies: dict[str, Any] = {}
    counterfactual = Counterfactual()
    duration = 0.0
    for policy in POLICIES:
        placement: Placement = {"contiguous only": TorusPlacement(fragmented=False),
                                "random scatter": RandomScatter(seed),
                                "ours": TorusPlacement(fragmented=True, time_budget_s=0.2)}[policy]
        state = FabricState(torus_racks(racks, programmable=policy == "ours"))
        grids = [RackGrid.of(state, f"r{r}") for r in range(racks)]
        twin = FabricState(torus_racks(racks, programmable=True)) if policy == "contiguous only" else None
        twin_grids = [RackGrid.of(twin, f"r{r}") for r in range(racks)] if twin else []
        ours = TorusPlacement(fragmented=True, time_budget_s=0.2)
        events: list[tuple[float, int, str, int]] = [(a[0], 0, "arrive", k) for k, a in enumerate(arrivals)]
        heapq.heapify(events)
        pending: list[int] = []
        queued: dict[str, list[int]] = {_name(s): [] for s in mix}
        wait: dict[str, list[float]] = {_name(s): [] for s in mix}
        bandwidth: dict[str, list[float]] = {_name(s): [] for s in mix}
        jct: list[float] = []
        util_area = last = 0.0
        area = dict.fromkeys(("all", "sub", "all_stranded", "sub_stranded"), 0.0)
        fragmented = arrived_so_far = 0
        at_arrival: list[float] = []
        cpu = time.process_time()
        while events:
            now, _, kind, k = heapq.heappop(events)
            free = set(state.free())
            if free and now > last:
                probe = [arrivals[j][1] for j in pending] + [a[1] for a in arrivals[arrived_so_far:]]
                for head, into in ((probe[:1], "all"), ([s for s in probe if s != WHOLE_RACK][:1], "sub")):
                    if not head:
                        continue
                    own = unusable(policy, state, grids, head[0], free)
                    for key, value in zip((into, f"{into}_stranded"), own, strict=True):
                        area[key] += (now - last) * value / len(free)
                    if twin is not None:
                        same = unusable("ours", twin, twin_grids, head[0], free)
                        for key, value in zip((into, f"{into}_stranded"), same, strict=True):
                            counterfactual.ours_area[key] += (now - last) * value / len(free)
            util_area += (now - last) * (1 - len(free) / capacity)
            last = now
            if kind == "done":
                state.release(f"j{k}")
                if twin is not None:
                    twin.release(f"j{k}")
            else:
                if free:  # what the arriving request finds (Poisson arrivals see time averages)
                    shape = arrivals[k][1]
                    at_arrival.append(unusable(policy, state, grids, shape, free)[0] / len(free))
                    if twin is not None:
                        counterfactual.ours_at_arrival.append(unusable("ours", twin, twin_grids, shape, free)[0]
                                                              / len(free))
                if twin is not None:
                    counterfactual.ask(state, twin, placement, ours)
                pending.append(k)
                arrived_so_far += 1
            for j in list(pending):
                arrived, shape, service = arrivals[j]
                request = CloudRequest(count=math.prod(shape), shape=shape)
                found = placement.place(request, state)
                if j == k and kind == "arrive":
                    queued[_name(shape)].append(int(isinstance(found, Unplaceable)))
                if isinstance(found, Unplaceable):
                    continue
                state.allocate(f"j{j}", found)
                if twin is not None:  # ours' contiguous first-fit picks the same block on the same free set
                    mirrored = ours.place(request, twin)
                    assert isinstance(mirrored, Allocation) and mirrored.accelerators == found.accelerators
                    twin.allocate(f"j{j}", mirrored)
                fragmented += found.how.startswith("fragmented")
                pending.remove(j)
                reference = sum(r.bandwidth_gbps for r in ring_shares(shape, (4, 4, 4), 100.0, steered=True))
                bw = found.bandwidth_gbps or reference
                bandwidth[_name(shape)].append(bw)
                wait[_name(shape)].append(now - arrived)
                run = service * ((1 - COMM_SHARE) + COMM_SHARE * reference / bw) if bandwidth_effect else service
                jct.append(now + run - arrived)
                heapq.heappush(events, (now + run, 1, "done", j))
        if twin is not None:
            duration = last
        policies[policy] = {
            "by_shape": {s: {"requests": len(queued[s]), "queued_at_arrival": _mean(queued[s]),
                             "wait_mean_h": _mean(wait[s]), "allreduce_gbps": _mean(bandwidth[s])}
                         for s in queued},
            **{name: area[key] / last for key, name in FRAGMENTATION.items()},
            "fragmentation_at_arrival": _mean(at_arrival),
            "utilisation": util_area / last,
            "jct_p50_h": statistics.median(jct), "jct_p95_h": statistics.quantiles(jct, n=20)[-1],
            "fragmented_placements": fragmented, "served": len(jct), "cpu_s": round(time.process_time() - cpu, 1)}
    return {"policies": policies, "same_states": counterfactual.summary(policies["contiguous only"], duration)}


SWEEP_LOADS = (0.5, 0.7, 0.9)
VARIANTS = {"placement and steering": True, "placement alone": False}
"""The sweep's two comparisons: the whole plug-in (steered slices finish sooner, which also frees chips
sooner), and placement alone (every job runs its service time whatever bandwidth it got)."""


def _sweep_one(task: tuple[str, float, int, str, int, int]) -> dict[str, Any]:
    mix_name, load, seed, variant, racks, jobs = task
    run = allocation_experiment(MIXES[mix_name], racks, jobs, seed, load=load, bandwidth_effect=VARIANTS[variant])
    return {"mix": mix_name, "load": load, "seed": seed, "variant": variant,
            **{policy: {"at_arrival": v["fragmentation_at_arrival"], "next": v["fragmentation"],
                        "utilisation": v["utilisation"]} for policy, v in run["policies"].items()}}


def fragmentation_sweep(racks: int, jobs: int, seeds: list[int], loads: tuple[float, ...] = SWEEP_LOADS,
                        workers: int | None = None) -> list[dict[str, Any]]:
    """Each policy's own fragmentation over offered loads, mixes, seeds and the two :data:`VARIANTS`
    (processes in parallel, one per core)."""
    from concurrent.futures import ProcessPoolExecutor

    tasks = [(m, load, seed, v, racks, jobs) for m in MIXES for load in loads for seed in seeds for v in VARIANTS]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_sweep_one, tasks))


def _mean(values: list[float] | list[int]) -> float:
    return statistics.mean(values) if values else float("nan")


def injection_bandwidth() -> dict[str, dict[str, float]]:
    """Per-accelerator injection bandwidth (links) of each shape: fixed wiring vs steered."""
    return {_name(s): {"fixed_links": sum(r.links for r in ring_shares(s, (4, 4, 4), 1.0, steered=False)),
                       "steered_links": sum(r.links for r in ring_shares(s, (4, 4, 4), 1.0, steered=True))}
            for s in SHAPES}


# ---- rails ----

@dataclass(frozen=True)
class Links:
    """α (s) and bandwidth (bits/s) of the paths a collective can take on a rail cluster."""

    scale_up_alpha: float
    scale_up_bps: float
    rail_alpha: float
    rail_bps: float

    @classmethod
    def of(cls, state: FabricState) -> Links:
        up = next(lk for lk in state.fabric.links if lk.kind == "scale-up")
        rail = next(lk for lk in state.fabric.links if lk.kind == "nic-rail")
        return cls(up.latency_us * 1e-6, up.bandwidth_gbps * 1e9, rail.latency_us * 1e-6, rail.bandwidth_gbps * 1e9)


def comm_time(state: FabricState, links: Links, ranks: tuple[str, ...], degrees: Parallelism,
              bytes_per_kind: dict[str, float]) -> float:
    """Predicted communication seconds per iteration (α-β, no overlap between kinds; groups of a kind in
    parallel). A group inside one scale-up domain runs a ring there. A cross-host group runs
    hierarchically on the rails: a member with a same-index partner on every other host sends its share
    over its own rail; one without must forward through a GPU on the partner's rail, sharing that GPU's NIC,
    so it gets half the rail bandwidth. Steps: ``2(n-1)`` for a ring AllReduce, 2 for a PP exchange."""
    total = 0.0
    for kind, groups in degrees.groups().items():
        size = bytes_per_kind.get(kind, 0.0)
        slowest = 0.0
        for group in groups:
            n = len(group)
            per_member, steps = (2 * size, 2) if kind == "pp" else (2 * (n - 1) / n * size, 2 * (n - 1))
            accs = [state.accelerators[ranks[r]] for r in group]
            hosts: dict[str, set[int]] = {}
            for a in accs:
                hosts.setdefault(a.host, set()).add(a.index)
            if len(hosts) == 1 and len({a.domain for a in accs}) == 1:
                t = steps * links.scale_up_alpha + 8 * per_member / links.scale_up_bps
            else:
                common = set.intersection(*hosts.values())
                worst = links.rail_bps if all(a.index in common for a in accs) else links.rail_bps / 2
                t = steps * links.rail_alpha + 8 * per_member / worst
            slowest = max(slowest, t)
        total += slowest
    return total


def rails_experiment(seed: int) -> dict[str, Any]:
    from propius.fabric.traffic import traffic_split

    mixes = [{"tp": 8, "dp": 2}, {"tp": 4, "dp": 3}, {"tp": 2, "dp": 3, "pp": 2}, {"tp": 1, "dp": 6},
             {"tp": 4, "dp": 2, "pp": 2}, {"tp": 2, "dp": 5}, {"tp": 1, "dp": 3}]
    bytes_per_kind = {"dp": 1e9, "pp": 1e8, "tp": 5e8}
    out: dict[str, Any] = {}
    for name, placement in (("first-fit", FirstFitPlacement()), ("rail-aligned", RailAlignedPlacement())):
        state, empty = FabricState(rail_cluster(32, 8)), FabricState(rail_cluster(32, 8))
        links = Links.of(state)
        rng = random.Random(seed)
        live: list[str] = []
        cross = same = tp_off = 0.0
        comm, ideal = [], []
        refused = 0
        for step in range(300):
            if live and rng.random() < 0.6:
                state.release(live.pop(rng.randrange(len(live))))
            degrees = Parallelism(**rng.choice(mixes))
            request = CloudRequest(count=degrees.size, parallel=degrees)
            found = placement.place(request, state)
            if isinstance(found, Unplaceable):
                refused += 1
                continue
            state.allocate(f"j{step}", found)
            live.append(f"j{step}")
            split = traffic_split(state, found.accelerators, degrees, bytes_per_kind)
            cross, same, tp_off = cross + split.cross_rail, same + split.same_rail, tp_off + split.tp_off_scale_up
            comm.append(comm_time(state, links, found.accelerators, degrees, bytes_per_kind))
            alone = RailAlignedPlacement().place(request, empty)
            assert isinstance(alone, Allocation)
            ideal.append(comm_time(empty, links, alone.accelerators, degrees, bytes_per_kind))
        jobs = len(comm)
        out[name] = {"jobs": jobs, "refused": refused, "cross_rail_GB_per_job_iteration": cross / 1e9 / jobs,
                     "same_rail_GB_per_job_iteration": same / 1e9 / jobs, "tp_off_scale_up_GB_total": tp_off / 1e9,
                     "comm_ms_per_iteration_mean": 1e3 * statistics.mean(comm),
                     "comm_ms_per_iteration_p95": 1e3 * statistics.quantiles(comm, n=20)[-1],
                     "slowdown_vs_empty_cluster_rail_aligned_mean": statistics.mean(
                         c / i for c, i in zip(comm, ideal, strict=True))}
    return out


# ---- failures ----

MODES = {  # name -> (programmable racks, spares per rack, empty racks per pod, spares lent to preemptible work)
    "in-rack optical swap": (True, 4, 0, False),
    "optical swap, spares run preemptible work": (True, 4, 0, True),
    "electrical degraded swap": (False, 4, 0, False),
    "migration (1 empty rack per pod)": (False, 0, 1, False),
    "no spares (wait for repair)": (False, 0, 0, False),
}
PREEMPTIBLE_LOAD = 0.8
"""Preemptible work offered to the spares, as a share of their capacity (our assumption)."""
PREEMPTIBLE_MEAN_H = 4.0
"""Mean run time of a preemptible job (one chip, exponential; our assumption)."""


@dataclass
class PreemptibleWork:
    """One-chip preemptible jobs (Poisson arrivals, one queue, oldest first) run on the racks' spares only:
    free chips stay for the jobs that wait for them. A preempted job goes back to the head of the queue and
    later runs what it had left plus the work since its last checkpoint (half an interval, expected).
    Spare-hours are integrated over the reserve (spares, lent ones included)."""

    rate_per_h: float
    rng: random.Random
    lost_h: float
    t: float = 0.0
    next_arrival: float = 0.0
    queue: list[float] = field(default_factory=list)
    running: dict[str, tuple[float, float]] = field(default_factory=dict)  # job -> (started, ends)
    ends: list[tuple[float, str]] = field(default_factory=list)
    counter: int = 0
    spare_h: float = 0.0
    used_h: float = 0.0
    preemptions: int = 0
    finished: int = 0
    lost_chip_h: float = 0.0

    def __post_init__(self) -> None:
        self.next_arrival = self.rng.expovariate(self.rate_per_h)

    def next_time(self) -> float:
        while self.ends and self.ends[0][1] not in self.running:  # a preempted job's stale end
            heapq.heappop(self.ends)
        return min(self.next_arrival, self.ends[0][0] if self.ends else math.inf)

    def integrate(self, state: FabricState, until: float) -> None:
        """Account spare-hours up to ``until``; call before every change of the state."""
        lent = len(state.lent())
        self.spare_h += (len(state.in_state(AcceleratorState.SPARE)) + lent) * (until - self.t)
        self.used_h += lent * (until - self.t)
        self.t = until

    def step(self, state: FabricState) -> None:
        """The next arrival or completion, then fill the spares."""
        when = self.next_time()
        self.integrate(state, when)
        if when == self.next_arrival:
            self.queue.append(self.rng.expovariate(1 / PREEMPTIBLE_MEAN_H))
            self.next_arrival = when + self.rng.expovariate(self.rate_per_h)
        else:
            _, job = heapq.heappop(self.ends)
            del self.running[job]
            state.release(job)
            self.finished += 1
        self.fill(state)

    def fill(self, state: FabricState) -> None:
        for spare in state.in_state(AcceleratorState.SPARE)[:len(self.queue)]:
            self.counter += 1
            job, left = f"p{self.counter}", self.queue.pop(0)
            state.allocate(job, Allocation((spare,), how="preemptible work", preemptible=True))
            self.running[job] = (self.t, self.t + left)
            heapq.heappush(self.ends, (self.t + left, job))

    def requeue(self, job: str, reclaimed: bool) -> None:
        """The job lost its chip (``reclaimed`` by a recovery, else the chip itself failed): queue it again."""
        started, ends = self.running.pop(job)
        lost = min(self.lost_h, self.t - started)
        self.queue.insert(0, ends - self.t + lost)
        if reclaimed:
            self.preemptions += 1
            self.lost_chip_h += lost
JOB_SHAPES: tuple[Shape, ...] = ((2, 4, 4), (2, 2, 4), (2, 2, 2), (2, 2, 1))
"""Each rack holds one job of each shape (60 chips) and 4 more chips: spares, or free."""


def failures_experiment(racks: int, seed: int) -> dict[str, Any]:
    rates, params = FailureRates(), RecoveryParams()
    hours = 24 * 365.0
    out: dict[str, Any] = {"params": {"horizon_h": HORIZON_H, "repair_h": rates.repair_hours,
                                      "chip_per_year": rates.chip_per_year, "board_per_year": rates.board_per_year,
                                      **params.model_dump()}}
    for mode, (programmable, spares, empty, lend) in MODES.items():
        state = FabricState(torus_racks(racks + empty, programmable=programmable))
        placer = TorusPlacement(fragmented=programmable, time_budget_s=0.1)
        shape_of: dict[str, Shape] = {}
        for r in range(racks):
            for a in range(spares):
                state.set_state(f"r{r}-h15-a{a}", AcceleratorState.SPARE)
            for j, shape in enumerate(JOB_SHAPES):
                found = placer.place(CloudRequest(count=math.prod(shape), shape=shape), state)
                assert isinstance(found, Allocation), found
                state.allocate(f"r{r}-j{j}", found)
                shape_of[f"r{r}-j{j}"] = shape

        def relocate(s: FabricState, n: int, placer: TorusPlacement = placer) -> Allocation | None:
            found = placer.place(CloudRequest(count=n), s)
            return found if isinstance(found, Allocation) else None

        rng = random.Random(seed)
        work = (PreemptibleWork(PREEMPTIBLE_LOAD * spares * racks / PREEMPTIBLE_MEAN_H, random.Random(seed + 1),
                                params.checkpoint_interval_s / 2 / 3600) if lend else None)
        if work is not None:
            work.fill(state)
        preemptible_failures = 0
        chip_rate, board_rate = rates.chip_per_year / hours, rates.board_per_year / hours
        n_chips, n_hosts = racks * 64, racks * 16
        total = n_chips * chip_rate + n_hosts * board_rate
        t = 0.0
        events: list[dict[str, Any]] = []
        repairs: list[tuple[float, str]] = []
        waiting: list[str] = []  # jobs queued for a repair
        while True:
            t += rng.expovariate(total)
            if t > hours:
                break
            while True:  # repairs and preemptible work up to the failure, in time order
                repair_at = repairs[0][0] if repairs else math.inf
                if min(repair_at, work.next_time() if work else math.inf) > t:
                    break
                if work is not None and work.next_time() < repair_at:
                    work.step(state)
                    continue
                _, acc = heapq.heappop(repairs)
                if work is not None:
                    work.integrate(state, repair_at)
                if state.state(acc) == AcceleratorState.FAILED and state.job_of(acc) is None:
                    state.set_state(acc, AcceleratorState.SPARE if spares else AcceleratorState.FREE)
                for job in list(waiting):  # a queued job returns as soon as its slice fits again
                    found = placer.place(CloudRequest(count=math.prod(shape_of[job]), shape=shape_of[job]), state)
                    if isinstance(found, Allocation):
                        state.allocate(job, found)
                        waiting.remove(job)
                if work is not None:
                    work.fill(state)
            if work is not None:
                work.integrate(state, t)
            r = rng.randrange(racks)
            if rng.random() < n_chips * chip_rate / total:
                victims = [f"r{r}-h{rng.randrange(16)}-a{rng.randrange(4)}"]
            else:
                h = rng.randrange(16)
                victims = [f"r{r}-h{h}-a{i}" for i in range(4)]
            for acc in victims:
                if state.state(acc) == AcceleratorState.FAILED:
                    continue
                job = state.job_of(acc)
                size = len(state.allocations[job].accelerators) if job else 0
                outcome = recover(state, acc, params, relocate=relocate if empty else None)
                heapq.heappush(repairs, (t + rates.repair_hours, acc))
                if work is not None and outcome.preempted is not None:
                    work.requeue(outcome.preempted, reclaimed=True)
                if work is not None and job in work.running:  # the lent spare itself failed
                    preemptible_failures += 1
                    if outcome.kind == "queue":
                        work.requeue(job, reclaimed=False)
                    continue
                if outcome.kind == "no job":
                    continue
                assert job is not None
                down_h = outcome.time_s / 3600
                if outcome.kind == "queue":  # back when the chip is repaired, after the horizon
                    waiting.append(job)
                    down_h = min(rates.repair_hours, HORIZON_H)
                    components = {k: v for k, v in outcome.components.items() if k != "repair"}
                    components["wait_for_repair"] = rates.repair_hours * 3600
                else:
                    components = dict(outcome.components)
                up_h = max(0.0, HORIZON_H - down_h)
                lost = size * (min(down_h, HORIZON_H) + (1 - outcome.throughput) * up_h)
                events.append({"kind": outcome.kind, "size": size, "lost_acc_h": lost, "components": components,
                               "throughput": outcome.throughput})
            if work is not None:
                work.fill(state)
        in_rack = [e for e in events if e["kind"] in ("in-rack swap", "electrical swap")]
        recovered = [e for e in events if e["kind"] != "queue"]
        kinds = sorted({e["kind"] for e in events})
        out[mode] = {
            "failures_hitting_a_job": len(events),
            "by_kind": {k: sum(e["kind"] == k for e in events) for k in kinds},
            "share_in_rack": len(in_rack) / max(1, len(events)),
            "goodput_lost_acc_h_per_failure": _mean([e["lost_acc_h"] for e in events]),
            "lost_share_of_horizon": _mean([e["lost_acc_h"] / (e["size"] * HORIZON_H) for e in events]),
            "reserve_share": (spares * racks + 64 * empty) / (64 * (racks + empty)),
            "post_recovery_throughput": _mean([e["throughput"] for e in recovered]) if recovered else None,
            "recovery_components_s": {k: {c: _mean([e["components"][c] for e in events if e["kind"] == k])
                                          for c in next(e["components"] for e in events if e["kind"] == k)}
                                      for k in kinds}}
        if work is not None:
            work.integrate(state, hours)
            out[mode]["preemptible"] = {
                "load": PREEMPTIBLE_LOAD, "mean_h": PREEMPTIBLE_MEAN_H,
                "spare_hours": work.spare_h, "spare_hours_used": work.used_h, "mean_reserve": work.spare_h / hours,
                "spare_hours_used_share": work.used_h / work.spare_h, "preemptions": work.preemptions,
                "preemptions_per_failure": work.preemptions / max(1, len(events)),
                "failures_of_lent_spares": preemptible_failures, "jobs_finished": work.finished,
                "chip_h_lost_per_preemption": work.lost_chip_h / max(1, work.preemptions),
                "queued_at_end": len(work.queue)}
    return out


# ---- output ----

def _allocation_tables(result: dict[str, Any]) -> list[str]:
    inj = result["injection"]
    lines = []
    for mix_name, mix in MIXES.items():
        alloc = result["allocation"][mix_name]["policies"]
        lines += [f"## Allocation, mix {mix_name!r} ({result['args']['racks']} racks, {result['args']['jobs']} jobs, "
                  f"load {LOAD:g})", "",
                  "| shape | mix | requests | queued at arrival: contiguous / scatter / ours | mean wait h: contiguous "
                  "/ scatter / ours | AllReduce Gb/s per acc: contiguous / scatter / ours | raw injection: fixed → "
                  "steered |", "|---|---|---|---|---|---|---|"]
        for shape, share in mix.items():
            s = _name(shape)
            row = [alloc[p]["by_shape"][s] for p in POLICIES]
            lines.append(f"| {s} | {share:.1%} | {row[0]['requests']} | "
                         + " / ".join(f"{r['queued_at_arrival']:.0%}" for r in row) + " | "
                         + " / ".join(f"{r['wait_mean_h']:.2f}" for r in row) + " | "
                         + " / ".join(f"{r['allreduce_gbps']:.0f}" for r in row) + " | "
                         + f"{inj[s]['fixed_links']:g} → {inj[s]['steered_links']:g} links "
                         f"({inj[s]['steered_links'] / inj[s]['fixed_links']:.1f}×) |")
        lines += ["", "| policy | fragmentation (next request) | fragmentation (next sub-rack request) | stranded "
                  "(next, next sub-rack) | utilisation | JCT p50 h | JCT p95 h | fragmented placements | served |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for p in POLICIES:
            a = alloc[p]
            lines.append(f"| {p} | {a['fragmentation']:.3f} | {a['fragmentation_sub_rack']:.3f} | "
                         f"{a['stranded']:.3f}, {a['stranded_sub_rack']:.3f} | "
                         f"{a['utilisation']:.3f} | {a['jct_p50_h']:.2f} | {a['jct_p95_h']:.2f} | "
                         f"{a['fragmented_placements']} | {a['served']} |")
        lines.append("")
    lines += ["## 32-chip requests on the contiguous-only run's own states (a 2x4x4 asked at every arrival)", "",
              "| mix | probes | some rack has ≥ 32 free | contiguous-only places it | contiguous-only rejects it | "
              "ours serves those (fragmented) | by the MILP | ours cannot: why |", "|---|---|---|---|---|---|---|---|"]
    for mix_name in MIXES:
        c = result["allocation"][mix_name]["same_states"]
        rejected = c["contiguous_rejected_with_room"]
        why = "; ".join(f"{n}× {reason}" for reason, n in c["ours_not_served_reasons"].items()) or "—"
        lines.append(f"| {mix_name} | {c['probes']} | {c['rack_with_32_free']} | {c['contiguous_placed']} | "
                     f"{rejected} ({_share(c['contiguous_rejected_share_with_room'])} of those with room) | "
                     f"{c['ours_served']} ({_share(c['ours_served_share'])}) | {c['ours_served_by_milp']} | {why} |")
    lines += ["", "Fragmentation on the same states (the contiguous-only run's; ours asked on its programmable twin); "
              "stranded: free chips in racks with enough of them by count that still cannot host:", "",
              "| mix | next request: contiguous → ours | next sub-rack request | stranded, next request | stranded, "
              "next sub-rack request |", "|---|---|---|---|---|"]
    for mix_name in MIXES:
        same = result["allocation"][mix_name]["same_states"]["fragmentation_same_states"]
        c, o = same["contiguous only"], same["ours"]
        lines.append(f"| {mix_name} | " + " | ".join(
            f"{c[k]:.3f} → {o[k]:.3f} ({_change(c[k], o[k])})" for k in FRAGMENTATION.values()) + " |")
    lines += ["", *anchor_table(result), ""]
    return lines


def _change(before: float, after: float) -> str:
    return "n/a" if before == 0 else f"{after / before - 1:+.0%}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _gain(alloc: dict[str, Any], key: str) -> float:
    return alloc["ours"][key] / alloc["contiguous only"][key] - 1


def anchor_table(result: dict[str, Any]) -> list[str]:
    """Morphlux's allocation anchors beside ours, with what differs in the setup."""
    inj = result["injection"]
    cols = []
    for mix_name in MIXES:
        alloc = result["allocation"][mix_name]["policies"]
        c, o = alloc["contiguous only"], alloc["ours"]
        gain = statistics.mean(o["by_shape"][_name(s)]["allreduce_gbps"] / c["by_shape"][_name(s)]["allreduce_gbps"]
                               for s in SUB_RACK) - 1
        cf = result["allocation"][mix_name]["same_states"]
        same = cf["fragmentation_same_states"]
        cut = {k: _change(same["contiguous only"][k], same["ours"][k]) for k in [*FRAGMENTATION.values(), "at_arrival"]}
        sweep = {(row["load"], row["variant"]): _change(*row["cuts"]) for row in _sweep_rows(result)
                 if row["mix"] == mix_name}
        swept = "; ".join(f"{variant} {', '.join(f'{sweep[(load, variant)]} at {load:g}' for load in SWEEP_LOADS)}"
                          for variant in VARIANTS if all((load, variant) in sweep for load in SWEEP_LOADS))
        cols.append({
            "bandwidth": f"{gain:+.0%} mean over the sub-rack shapes",
            "fragmentation": f"own runs, at arrivals, by offered load: {swept or 'not swept'}; same states at "
                             f"{LOAD:g}: {cut['at_arrival']} (at arrivals), {cut['fragmentation']} (next request); "
                             f"stranded by shape: {cut['stranded']}",
            "rejected": f"contiguous-only rejects {_share(cf['contiguous_rejected_share_with_room'])} of 2x4x4 "
                        f"asks with ≥ 32 free in a rack; ours serves {_share(cf['ours_served_share'])} of those",
        })
    small = inj["2x2x1"]
    return [f"| Morphlux anchor | paper | ours, mix {list(MIXES)[0]!r} | ours, mix {list(MIXES)[1]!r} | "
            "what differs |", "|---|---|---|---|---|",
            f"| allocation bandwidth | up to +66 % | {cols[0]['bandwidth']} | {cols[1]['bandwidth']} | bandwidth "
            "counted in links (a ring's ports × link rate), no FlexNet derating; paper: FlexNet model, 64 racks |",
            f"| small slice (2x2x1) raw injection | up to 3× | {small['steered_links'] / small['fixed_links']:.1f}× "
            f"({small['fixed_links']:g} → {small['steered_links']:g} links) | same | same argument: 2 of 6 ports "
            "usable on fixed wiring |",
            f"| compute fragmentation | up to −70 % | {cols[0]['fragmentation']} | {cols[1]['fragmentation']} | "
            f"ours: share of free chips no placement of the arriving request would use, {result['args']['racks']} "
            "racks of one slice each (count shortage, which no placement fixes, dominates at high load and with "
            "whole-rack requests); paper: its own simulator and metric, TPU v4 distribution incl. multi-rack "
            "slices |",
            f"| fragmented 32-chip requests | ~75 % rejected by contiguous allocators, served by Morphlux | "
            f"{cols[0]['rejected']} | {cols[1]['rejected']} | ours asks a 2x4x4 at every arrival of the "
            "contiguous-only run and places it on the same allocations over programmable racks |"]


def _sweep_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The sweep per (mix, load, variant), averaged over seeds: each policy's fragmentation at arrivals and for
    the next request, and ``cuts`` (contiguous-only's and ours' at arrivals)."""
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    for row in result.get("fragmentation_sweep", []):
        groups.setdefault((row["mix"], row["load"], row["variant"]), []).append(row)
    rows = []
    for (mix_name, load, variant), runs in groups.items():
        mean = {policy: {k: statistics.mean(r[policy][k] for r in runs) for k in ("at_arrival", "next")}
                for policy in POLICIES}
        rows.append({"mix": mix_name, "load": load, "variant": variant, "seeds": len(runs), **mean,
                     "cuts": (mean["contiguous only"]["at_arrival"], mean["ours"]["at_arrival"]),
                     "per_seed": [_change(r["contiguous only"]["at_arrival"], r["ours"]["at_arrival"]) for r in runs]})
    return rows


def _sweep_table(result: dict[str, Any]) -> list[str]:
    rows = _sweep_rows(result)
    if not rows:
        return []
    lines = ["## Fragmentation by offered load (each policy's own run; mean over seeds)", "",
             "Share of free chips that no placement of the request would use: at arrivals (the arriving request) "
             "and time-averaged for the next request (the head of the queue, else the next arrival).", "",
             "| mix | load | comparison | at arrivals: contiguous → ours (change; per seed) | random scatter | "
             "next request: contiguous → ours |", "|---|---|---|---|---|---|"]
    for row in rows:
        c, o, r = row["contiguous only"], row["ours"], row["random scatter"]
        lines.append(f"| {row['mix']} | {row['load']:g} | {row['variant']} | {c['at_arrival']:.3f} → "
                     f"{o['at_arrival']:.3f} ({_change(c['at_arrival'], o['at_arrival'])}; "
                     f"{', '.join(row['per_seed'])}) | {r['at_arrival']:.3f} | {c['next']:.3f} → {o['next']:.3f} "
                     f"({_change(c['next'], o['next'])}) |")
    return [*lines, ""]


def tables(result: dict[str, Any]) -> str:
    rails, fail = result["rails"], result["failures"]
    lines = _allocation_tables(result) + _sweep_table(result)
    lines += ["## Rails (32 hosts × 8 GPUs, 300 arrivals with releases)", "",
              "| placement | jobs | cross-rail GB / job-iteration | TP GB off scale-up (total) | predicted comm "
              "ms / iteration (mean, p95) | vs the same job rail-aligned on an empty cluster |",
              "|---|---|---|---|---|---|"]
    for name, r in rails.items():
        lines.append(f"| {name} | {r['jobs']} | {r['cross_rail_GB_per_job_iteration']:.2f} | "
                     f"{r['tp_off_scale_up_GB_total']:.0f} | {r['comm_ms_per_iteration_mean']:.1f}, "
                     f"{r['comm_ms_per_iteration_p95']:.1f} | "
                     f"{r['slowdown_vs_empty_cluster_rail_aligned_mean']:.2f}× |")
    p = fail["params"]
    lines += ["", f"## Failures ({result['args']['racks']} racks, one simulated year; goodput lost over "
              f"{p['horizon_h']:g} h after each failure; repair {p['repair_h']:g} h)", "",
              "| mode | failures hitting a job | handled in-rack | goodput lost / failure (acc·h) | share of the "
              "job's horizon lost | reserve | post-recovery throughput | outcomes |",
              "|---|---|---|---|---|---|---|---|"]
    for mode in MODES:
        f = fail[mode]
        lines.append(f"| {mode} | {f['failures_hitting_a_job']} | {f['share_in_rack']:.1%} | "
                     f"{f['goodput_lost_acc_h_per_failure']:.1f} | {f['lost_share_of_horizon']:.1%} | "
                     f"{f['reserve_share']:.2%} | {_throughput(f['post_recovery_throughput'])} | "
                     + ", ".join(f"{k} {v}" for k, v in f["by_kind"].items()) + " |")
    lines += ["", "| recovery kind | components (s, mean) | recovery time (s) = sum |", "|---|---|---|"]
    seen: set[str] = set()
    for mode in MODES:
        for kind, parts in fail[mode]["recovery_components_s"].items():
            if kind in seen:
                continue
            seen.add(kind)
            lines.append(f"| {kind} | " + " + ".join(f"{c} {v:g}" for c, v in parts.items())
                         + f" | {sum(parts.values()):g} |")
    lent = fail["optical swap, spares run preemptible work"]["preemptible"]
    lines += ["", f"Spares running preemptible work (one-chip jobs, {lent['mean_h']:g} h mean, offered "
              f"{lent['load']:.0%} of the spares' capacity): {lent['spare_hours_used_share']:.1%} of "
              f"{lent['spare_hours']:.0f} spare-hours used (reserve {lent['mean_reserve']:.1f} chips on average: "
              f"repaired chips return as spares); {lent['preemptions']} preemptions, "
              f"{lent['preemptions_per_failure']:.2f} per failure hitting a job; "
              f"{lent['chip_h_lost_per_preemption']:.2f} chip-h lost per preemption; "
              f"{lent['failures_of_lent_spares']} failures of a lent spare; {lent['jobs_finished']} jobs finished."]
    optical, electrical = fail["in-rack optical swap"], fail["electrical degraded swap"]
    lines += ["", f"Failure must-shows: handled in-rack with 4 spares per 64: {optical['share_in_rack']:.1%} "
              f"(≥ 95 %: {'met' if optical['share_in_rack'] >= 0.95 else 'NOT met'}); post-recovery throughput "
              f"{optical['post_recovery_throughput']:.2f} optical vs {electrical['post_recovery_throughput']:.2f} "
              f"electrical ({optical['post_recovery_throughput'] / electrical['post_recovery_throughput']:.1f}×; "
              "LUMION: nearly 2×); recovery time = the sum of its components (the table's last column)."]
    return "\n".join(lines)


def _throughput(value: float | None) -> str:
    return "1.00 after the repair" if value is None else f"{value:.2f}"


def figure(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fail, rails = result["failures"], result["rails"]
    fig, axes = plt.subplots(2, 3, figsize=(16, 8))
    width = 0.27
    default = result["allocation"]["tpu-v4"]["policies"]
    shapes = [_name(s) for s in SHAPES]
    for i, p in enumerate(POLICIES):
        xs = [k + (i - 1) * width for k in range(len(shapes))]
        axes[0][0].bar(xs, [default[p]["by_shape"][s]["queued_at_arrival"] for s in shapes], width, label=p)
        axes[0][1].bar(xs, [default[p]["by_shape"][s]["allreduce_gbps"] for s in shapes], width, label=p)
        mixes = list(MIXES)
        axes[0][2].bar([k + (i - 1) * width for k in range(len(mixes))],
                       [result["allocation"][m]["policies"][p]["fragmentation"] for m in mixes], width, label=p)
    axes[0][2].set_xticks(range(len(MIXES)), [f"mix {m}" for m in MIXES])
    for ax, title in ((axes[0][0], "share queued at arrival (mix tpu-v4)"),
                      (axes[0][1], "AllReduce Gb/s per accelerator (mix tpu-v4)"),
                      (axes[0][2], "fragmentation (next request)")):
        if ax is not axes[0][2]:
            ax.set_xticks(range(len(shapes)), shapes)
        ax.set_title(title)
        ax.legend(fontsize=8)
    counter = [result["allocation"][m]["same_states"] for m in MIXES]
    axes[1][0].bar([f"mix {m}" for m in MIXES], [c["ours_served_share"] or 0.0 for c in counter])
    axes[1][0].set_ylim(0, 1)
    axes[1][0].set_title("2x4x4 asks contiguous-only rejects with room:\nshare ours serves on the same state")
    modes = list(MODES)
    axes[1][1].barh(modes, [fail[m]["goodput_lost_acc_h_per_failure"] for m in modes])
    axes[1][1].set_title(f"goodput lost per failure (acc·h over {HORIZON_H:g} h)")
    axes[1][2].bar(list(rails), [r["comm_ms_per_iteration_mean"] for r in rails.values()])
    axes[1][2].set_title("predicted comm ms per iteration (rails)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweep-seeds", type=int, default=2,
                        help="seeds (from --seed) of the fragmentation sweep over loads; 0 skips it")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for fabric.json and fabric.png")
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    result = {"allocation": {name: allocation_experiment(mix, args.racks, args.jobs, args.seed)
                             for name, mix in MIXES.items()},
              "injection": injection_bandwidth(),
              "fragmentation_sweep": fragmentation_sweep(args.racks, args.jobs,
                                                         list(range(args.seed, args.seed + args.sweep_seeds)))
              if args.sweep_seeds > 0 else [],
              "rails": rails_experiment(args.seed), "failures": failures_experiment(args.racks, args.seed),
              "setup": {"mixes": {name: {_name(s): w for s, w in mix.items()} for name, mix in MIXES.items()},
                        "probe": _name(PROBE), "load": LOAD, "sweep_loads": SWEEP_LOADS, "comm_share": COMM_SHARE,
                        "horizon_h": HORIZON_H},
              "anchors": ANCHORS, "args": vars(args)}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["cpu_s"] = round(time.process_time() - cpu, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fabric.json").write_text(json.dumps(result, indent=1, sort_keys=True, default=str))
    figure(result, args.out / "fabric.png")
    print(tables(result))
    print(f"\n(wall time {result['wall_s']:.0f} s, CPU time {result['cpu_s']:.0f} s: one core)")


if __name__ == "__main__":
    main()
