"""Fabric-aware placement, measured with the placement plug-ins themselves (seeded, discrete-event).

1. allocation: Poisson arrivals of torus slices on 4×4×4 racks (mix ``SHAPES``: 30 % sub-rack by count),
   served first-pending-that-fits; contiguous-only vs random scatter vs ours (contiguous, then fragmented
   with bandwidth steering). Per shape: share queued at arrival; fragmentation (time-averaged share of
   free accelerators in racks that cannot host the next pending request); utilisation; per-slice
   AllReduce bandwidth; JCT p50/p95 (service time stretched by the communication share over bandwidth).
2. rails: rail-aligned vs first-fit on a rail cluster under churn: cross-rail bytes per iteration.
3. failures: a year of seeded chip and board failures on racks holding 4 spares per 64; in-rack optical
   swap vs electrical degraded swap vs migration (a reserved rack) vs no spares.

Writes ``results/fabric.json`` and ``results/fabric.png``; prints the tables beside the papers' anchors.

    python benchmarks/fabric.py                        # the default run: 4 racks, 200 jobs
    python benchmarks/fabric.py --racks 8 --jobs 400   # larger (minutes)
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from policies.placement import FirstFitPlacement, Placement, RailAlignedPlacement, TorusPlacement  # noqa: E402
from propius.fabric import AcceleratorState, Allocation, CloudRequest, FabricState, Unplaceable  # noqa: E402
from propius.fabric.generators import rail_cluster, torus_racks  # noqa: E402
from propius.fabric.recovery import RecoveryParams, recover  # noqa: E402
from propius.fabric.spares import FailureRates  # noqa: E402
from propius.fabric.torus import PORTS, RackGrid, aligned_origins, orientations  # noqa: E402
from propius.fabric.traffic import traffic_split  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SHAPES = {(2, 2, 1): 0.10, (2, 2, 2): 0.08, (2, 2, 4): 0.06, (2, 4, 4): 0.06, (4, 4, 4): 0.70}
"""Slice shape -> share of requests: 30 % sub-rack (a synthetic stand-in for the TPU v4 distribution)."""
COMM_SHARE = 0.3
"""Share of a job's time spent in AllReduce at the steered bandwidth of its shape."""
ANCHORS = {"morphlux_bandwidth_gain": 0.66, "morphlux_fragmentation_cut": 0.70, "lumion_in_rack_share": 0.95,
           "lumion_post_recovery_vs_electrical": 2.0}


class RandomScatter(Placement):
    """The packet-switched analogue: random free accelerators in one rack (any rack that has enough); its
    ring pays the mean torus hop distance between consecutive members on each of its 6 ports' links."""

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
        coord = {a: state.accelerators[a].coord for a in chosen}
        dims = state.racks[rack].torus
        assert dims is not None

        def hops(a: str, b: str) -> int:
            ca, cb = coord[a], coord[b]
            assert ca is not None and cb is not None
            return sum(min(abs(x - y), d - abs(x - y)) for x, y, d in zip(ca, cb, dims, strict=True))

        mean = statistics.mean(hops(a, b) for a, b in zip(chosen, chosen[1:] + chosen[:1], strict=True)) if n > 1 else 1
        from propius.fabric.state import RingShare

        link = RackGrid.of(state, rack).link_gbps
        return Allocation(tuple(chosen), rings=(RingShare("ring", PORTS / mean, PORTS / mean * link),) if n > 1 else (),
                          how="random scatter")


def _can_host(policy: str, state: FabricState, grid: RackGrid, shape: tuple[int, int, int], free: set[str]) -> bool:
    n = shape[0] * shape[1] * shape[2]
    rack_free = [a for a in grid.acc_at.values() if a in free]
    if policy == "random scatter":
        return len(rack_free) >= n
    for oriented in orientations(shape, grid.dims):
        for origin in aligned_origins(oriented, grid.dims):
            block = [grid.acc_at[(origin[0] + i, origin[1] + j, origin[2] + k)]
                     for i in range(oriented[0]) for j in range(oriented[1]) for k in range(oriented[2])]
            if all(a in free for a in block):
                return True
    if policy == "contiguous only" or shape[0] % 2 or shape[1] % 2:
        return False
    servers = sum(all(a in free for a in grid.host_accelerators(h)) for h in grid.host_at.values())
    return servers * 4 >= n


def allocation_experiment(racks: int, jobs: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    shapes, weights = list(SHAPES), list(SHAPES.values())
    arrivals, t = [], 0.0
    capacity = racks * 64
    mean_size = sum(s[0] * s[1] * s[2] * w for s, w in SHAPES.items())
    rate = 0.95 * capacity / mean_size  # per mean service time (1 h): about 95 % offered load
    for _ in range(jobs):
        t += rng.expovariate(rate)
        arrivals.append((t, rng.choices(shapes, weights)[0], rng.expovariate(1.0)))
    out: dict[str, Any] = {}
    for policy in ("contiguous only", "random scatter", "ours"):
        placement: Placement = {"contiguous only": TorusPlacement(fragmented=False),
                                "random scatter": RandomScatter(seed),
                                "ours": TorusPlacement(fragmented=True, time_budget_s=0.2)}[policy]
        state = FabricState(torus_racks(racks))
        grids = [RackGrid.of(state, f"r{r}") for r in range(racks)]
        events: list[tuple[float, int, str, int]] = [(a[0], 0, "arrive", k) for k, a in enumerate(arrivals)]
        heapq.heapify(events)
        pending: list[int] = []
        queued_at_arrival: dict[str, list[int]] = {}
        bandwidth: dict[str, list[float]] = {}
        jct: list[float] = []
        frag_area = util_area = last = 0.0
        fragmented = 0
        while events:
            now, _, kind, k = heapq.heappop(events)
            free = set(state.free())
            if pending:
                head = arrivals[pending[0]][1]
                stuck = sum(sum(a in free for a in g.acc_at.values()) for g in grids
                            if not _can_host(policy, state, g, head, free))
                frag_area += (now - last) * (stuck / len(free) if free else 0.0)
            util_area += (now - last) * (1 - len(free) / capacity)
            last = now
            if kind == "done":
                state.release(f"j{k}")
            else:
                pending.append(k)
            for j in list(pending):
                arrived, shape, service = arrivals[j]
                found = placement.place(CloudRequest(count=shape[0] * shape[1] * shape[2], shape=shape), state)
                name = "x".join(map(str, shape))
                if j == k and kind == "arrive":
                    queued_at_arrival.setdefault(name, []).append(int(isinstance(found, Unplaceable)))
                if isinstance(found, Unplaceable):
                    continue
                state.allocate(f"j{j}", found)
                fragmented += found.how.startswith("fragmented")
                pending.remove(j)
                reference = sum(r.bandwidth_gbps for r in _steered(shape))
                bw = found.bandwidth_gbps or reference
                bandwidth.setdefault(name, []).append(bw)
                run = service * ((1 - COMM_SHARE) + COMM_SHARE * reference / bw)
                jct.append(now + run - arrived)
                heapq.heappush(events, (now + run, 1, "done", j))
        out[policy] = {
            "queued_at_arrival_by_shape": {s: sum(v) / len(v) for s, v in sorted(queued_at_arrival.items())},
            "fragmentation": frag_area / last, "utilisation": util_area / last,
            "allreduce_gbps_by_shape": {s: statistics.mean(v) for s, v in sorted(bandwidth.items())},
            "jct_p50_h": statistics.median(jct), "jct_p95_h": statistics.quantiles(jct, n=20)[-1],
            "fragmented_placements": fragmented, "served": len(jct)}
    return out


def _steered(shape: tuple[int, int, int]) -> tuple:
    from propius.fabric.torus import ring_shares

    return ring_shares(shape, (4, 4, 4), 100.0, steered=True)


def rails_experiment(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    mixes = [{"tp": 8, "dp": 2}, {"tp": 4, "dp": 3}, {"tp": 2, "dp": 3, "pp": 2}, {"tp": 1, "dp": 6},
             {"tp": 4, "dp": 2, "pp": 2}, {"tp": 2, "dp": 5}, {"tp": 1, "dp": 3}]
    bytes_per_kind = {"dp": 1e9, "pp": 1e8, "tp": 5e8}
    out: dict[str, Any] = {}
    for name, placement in (("first-fit", FirstFitPlacement()), ("rail-aligned", RailAlignedPlacement())):
        state = FabricState(rail_cluster(32, 8))
        rng = random.Random(seed)
        live: list[str] = []
        totals = {"cross_rail_GB": 0.0, "same_rail_GB": 0.0, "tp_off_scale_up_GB": 0.0, "jobs": 0, "refused": 0}
        for step in range(300):
            if live and rng.random() < 0.6:
                state.release(live.pop(rng.randrange(len(live))))
            degrees = rng.choice(mixes)
            request = CloudRequest(count=degrees.get("tp", 1) * degrees.get("dp", 1) * degrees.get("pp", 1),
                                   parallel=degrees)
            found = placement.place(request, state)
            if isinstance(found, Unplaceable):
                totals["refused"] += 1
                continue
            state.allocate(f"j{step}", found)
            live.append(f"j{step}")
            split = traffic_split(state, found.accelerators, request.degrees, bytes_per_kind)
            totals["cross_rail_GB"] += split.cross_rail / 1e9
            totals["same_rail_GB"] += split.same_rail / 1e9
            totals["tp_off_scale_up_GB"] += split.tp_off_scale_up / 1e9
            totals["jobs"] += 1
        totals["cross_rail_GB_per_job_iteration"] = totals["cross_rail_GB"] / max(1, totals["jobs"])
        out[name] = totals
    return out


def failures_experiment(racks: int, seed: int) -> dict[str, Any]:
    rates, params = FailureRates(), RecoveryParams()
    out: dict[str, Any] = {}
    hours = 24 * 365.0
    for mode in ("in-rack optical swap", "electrical swap", "migration", "no spares"):
        extra = 1 if mode == "migration" else 0
        state = FabricState(torus_racks(racks + extra, programmable=mode != "electrical swap"))
        spares = 0 if mode in ("migration", "no spares") else 4
        for r in range(racks):
            for a in range(spares):
                state.set_state(f"r{r}-h15-a{a}", AcceleratorState.SPARE)
            for j, shape in enumerate([(2, 4, 4), (2, 2, 4), (2, 2, 2), (2, 2, 1)]):
                found = TorusPlacement(time_budget_s=0.1).place(
                    CloudRequest(count=shape[0] * shape[1] * shape[2], shape=shape), state)
                assert isinstance(found, Allocation), found
                state.allocate(f"r{r}-j{j}", found)
        rng = random.Random(seed)
        per_chip = rates.chip_per_year / hours
        per_board = rates.board_per_year / hours
        n_chips, n_hosts = racks * 64, racks * 16
        total = n_chips * per_chip + n_hosts * per_board
        t, results = 0.0, []
        repairs: list[tuple[float, str]] = []
        while True:
            t += rng.expovariate(total)
            if t > hours:
                break
            while repairs and repairs[0][0] <= t:
                _, acc = heapq.heappop(repairs)
                if state.state(acc) == AcceleratorState.FAILED:
                    state.set_state(acc, AcceleratorState.SPARE if spares else AcceleratorState.FREE)
            r = rng.randrange(racks)
            if rng.random() < n_chips * per_chip / total:
                victims = [f"r{r}-h{rng.randrange(16)}-a{rng.randrange(4)}"]
            else:
                h = rng.randrange(16)
                victims = [f"r{r}-h{h}-a{i}" for i in range(4)]
            for acc in victims:
                if state.state(acc) == AcceleratorState.FAILED:
                    continue
                job = state.job_of(acc)
                size = len(state.allocations[job].accelerators) if job else 0

                def relocate(s: FabricState, n: int) -> Allocation | None:
                    found = TorusPlacement(time_budget_s=0.1).place(CloudRequest(count=n), s)
                    return found if isinstance(found, Allocation) else None

                outcome = recover(state, acc, params, relocate=relocate if mode == "migration" else None)
                heapq.heappush(repairs, (t + rates.repair_hours, acc))
                if outcome.kind == "no job":
                    continue
                lost_h = outcome.time_s / 3600 * size + (1 - outcome.throughput) * size * rates.repair_hours
                results.append((outcome.kind, lost_h, outcome.throughput))
        kinds = [k for k, _, _ in results]
        out[mode] = {
            "failures": len(results),
            "share_in_rack": sum(k in ("in-rack swap", "electrical swap") for k in kinds) / max(1, len(kinds)),
            "goodput_lost_acc_h_per_failure": statistics.mean(v for _, v, _ in results) if results else 0.0,
            "post_recovery_throughput": statistics.mean(v for *_, v in results) if results else 1.0,
            "reserve_share": (spares * racks + 64 * extra) / (64 * (racks + extra)),
            "by_kind": {k: kinds.count(k) for k in sorted(set(kinds))}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = {"allocation": allocation_experiment(args.racks, args.jobs, args.seed),
              "rails": rails_experiment(args.seed), "failures": failures_experiment(args.racks, args.seed),
              "anchors": ANCHORS, "args": vars(args)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fabric.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
