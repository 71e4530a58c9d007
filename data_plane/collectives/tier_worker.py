"""One aggregator shard of the sharded tier, a process of its own (``python -m data_plane.collectives.tier_worker``).

Started by :func:`data_plane.collectives.tier.run_tier`, which wrote the plan (JSON) and each cohort's updates
(safetensors files) into the run folder; nothing crosses processes as a pickle. Every step the shard folds
its cohort (:class:`data_plane.fold.WeightedSum`), moves its sums to the common unit :data:`UNIT`, and the
shards add their packed sums with the step's algorithm: gloo's (or NCCL's) own ``all_reduce``, or StragglAR
(:func:`data_plane.collectives.gloo.stragglar_allreduce`) over the group order
:meth:`Selector.form_group` gives, the persistent straggler last. After the collective the shards exchange
their arrival and finish times; every shard feeds the same :class:`StragglerTracker` with them and so picks
the same algorithm for the next step without a further message. torch.profiler records each shard's steps
(``ProfilerStep#<n>``) with the fold and the collectives in them; rank 0 writes the mean and the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from data_plane.collectives.cost import LinkCost
from data_plane.collectives.process_group import shard_device
from data_plane.collectives.schedule import stragglar_schedule
from data_plane.collectives.selector import Algorithm, Selector, StragglerTracker
from data_plane.fold import WeightedSum
from data_plane.tensors import check_finite, decode, encode

__all__ = ["COHORT_WAIT_RANGE", "FOLD_RANGE", "UNIT"]

UNIT = float(2**40)
"""The weight unit the shards add their sums in: a power of two above every weight (``MAX_NUM_SAMPLES`` is
1e12), known before any update arrives, so agreeing on it costs no collective that would wait for the
straggler, and scaling to it is exact whenever a shard's largest weight is a power of two."""
FOLD_RANGE = "tier_fold_cohort"
"""The profiler range around a shard's fold (numpy work the profiler cannot see into); no communication token."""
COHORT_WAIT_RANGE = "tier_cohort_wait"
"""The profiler range of an injected delay: the shard's cohort is late (idle, neither compute nor transfer)."""


def _load_cohort(folder: Path, weights: list[float]) -> list[tuple[dict[str, np.ndarray], float]]:
    cohort = []
    for index, weight in enumerate(weights):
        tensors = decode((folder / f"update{index}.safetensors").read_bytes())
        check_finite(tensors)
        cohort.append((tensors, float(weight)))
    return cohort


def _fold(cohort: list[tuple[dict[str, np.ndarray], float]]) -> WeightedSum:
    partial = WeightedSum()
    for tensors, weight in cohort:
        partial.fold(tensors, weight)
    partial.rescale(UNIT)
    return partial


def _worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    run = Path(args.run)
    plan = json.loads((run / "plan.json").read_text())
    n, backend = plan["world"], plan["backend"]
    device = shard_device(backend, args.rank)
    dist.init_process_group(backend, store=dist.FileStore(str(run / "store"), n), rank=args.rank, world_size=n,
                            timeout=timedelta(seconds=plan["collective_timeout_s"]))
    try:
        _Shard(plan, args.rank, run, device).run()
    finally:
        dist.destroy_process_group()


class _Shard:
    def __init__(self, plan: dict[str, Any], rank: int, run: Path, device: Any) -> None:
        self.plan, self.rank, self.run_dir, self.device = plan, rank, run, device
        self.n = plan["world"]
        self.cohort = _load_cohort(run / f"cohort{rank}", plan["weights"][rank])
        self.link = LinkCost(plan["link"]["alpha_s"], plan["link"]["beta_s_per_byte"], plan["link"]["ocs"])
        self.selector = Selector(**plan["selector"])
        self.tracker = StragglerTracker()
        self.rounds = stragglar_schedule(self.n).completion_rounds if self.n >= 3 else None

    def collective(self, stragglar: bool, order: list[int], flat: Any) -> Any:
        import torch.distributed as dist
        from torch.profiler import record_function

        from data_plane.collectives.gloo import stragglar_allreduce

        if stragglar:
            with record_function("tier_stragglar_sendrecv"):
                return stragglar_allreduce(flat, order, self.rank)
        with record_function("tier_allreduce"):
            dist.all_reduce(flat)
            return flat

    def _exchange(self, arrival: float, finish: float) -> tuple[dict[int, float], list[float]]:
        import torch
        import torch.distributed as dist

        times = [torch.zeros(2, dtype=torch.float64, device=self.device) for _ in range(self.n)]
        dist.all_gather(times, torch.tensor([arrival, finish], dtype=torch.float64, device=self.device))
        return {r: float(t[0]) for r, t in enumerate(times)}, [float(t[1]) for t in times]

    def run(self) -> None:
        import torch
        import torch.distributed as dist
        from torch.profiler import ProfilerActivity, profile, record_function, schedule

        plan, n = self.plan, self.n
        modes = [mode for mode in plan["modes"] for _ in range(plan["steps"])]
        partial = _fold(self.cohort)
        size = 8 * partial.pack().size
        warm = torch.from_numpy(partial.pack()).to(self.device)
        self.collective(False, list(range(n)), warm.clone())  # every pair connected before the profiled steps
        self.collective(True, list(range(n)), warm.clone())

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        trace_path = str(self.run_dir / f"rank{self.rank}.trace.json")
        steps: list[dict[str, Any]] = []
        first: np.ndarray | None = None
        max_step_diff = 0.0
        choice = self.selector.choose(n, size, self.link, self.tracker, self.rounds)
        order = self.selector.form_group(list(range(n)), self.tracker)
        summed = warm.cpu().numpy()
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=len(modes), repeat=1),
                     on_trace_ready=lambda prof: prof.export_chrome_trace(trace_path)) as prof:
            dist.barrier()  # the profiler starts at different times per process: its warmup step absorbs that,
            prof.step()  # so every shard's ProfilerStep#1 starts together
            for index, mode in enumerate(modes):
                started = time.perf_counter()
                with record_function(FOLD_RANGE):
                    partial = _fold(self.cohort)
                    flat = torch.from_numpy(partial.pack()).to(self.device)
                if self.rank == plan["straggler"] and plan["delay_s"] > 0:
                    with record_function(COHORT_WAIT_RANGE):
                        time.sleep(plan["delay_s"])
                stragglar = n >= 3 and (mode == "stragglar" or
                                        (mode == "auto" and choice.algorithm is Algorithm.STRAGGLAR))
                arrival = time.perf_counter()
                result = self.collective(stragglar, order, flat)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                finish = time.perf_counter()
                arrivals, finishes = self._exchange(arrival, finish)
                self.tracker.observe(arrivals)
                summed = result.cpu().numpy()
                first = summed.copy() if first is None else first
                max_step_diff = max(max_step_diff, float(np.abs(summed - first).max()))
                steps.append({
                    "step": index + 1, "mode": mode, "algorithm": "stragglar" if stragglar else "allreduce",
                    "selected": choice.algorithm.value,
                    "predicted_s": {a.value: t for a, t in choice.predicted_s.items()},
                    "predicted_delay_s": choice.delay_s, "order": order,
                    "lag_s": {str(r): at - min(arrivals.values()) for r, at in arrivals.items()},
                    "last_arrival": max(arrivals, key=arrivals.__getitem__),
                    "after_arrival_s": max(finishes) - max(arrivals.values()),
                    "step_s": max(finishes) - started,
                })
                choice = self.selector.choose(n, size, self.link, self.tracker, self.rounds)
                order = self.selector.form_group(list(range(n)), self.tracker)
                prof.step()
        if self.rank == 0:
            partial.unpack(summed)
            (self.run_dir / "mean.safetensors").write_bytes(encode(partial.mean()))
            report = {"world": n, "backend": plan["backend"], "bytes": size, "steps": steps,
                      "total_weight": partial.weight * UNIT, "results": sum(len(w) for w in plan["weights"]),
                      "max_abs_diff_between_steps": max_step_diff, "completion_rounds": self.rounds,
                      "persistent_member": self.tracker.persistent_member,
                      "persistence": self.tracker.persistence}
            (self.run_dir / "report.json").write_text(json.dumps(report, indent=1))
        dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--run", required=True)
    _worker(parser.parse_args())
    # Its outputs are written and its process group destroyed: leave without the interpreter's teardown,
    # where torch's C++ statics (the profiler's and gloo's threads) are destroyed in no set order. A shard
    # once aborted after its profiled steps with "terminate called without an active exception" (exit -6),
    # the mark of a C++ thread destroyed while still running.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
