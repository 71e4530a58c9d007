"""Run a StragglAR schedule with point-to-point transfers over gloo in real local processes, against gloo's own
``all_reduce``, with one rank (the last) late by a seeded delay of several ReduceScatter times.

:func:`launch` starts ``n`` fresh interpreters (``python -m data_plane.collectives.gloo``) that meet over a
file store and talk over loopback; rank 0 writes the measurements as JSON, which :func:`launch` reads back
(no pickles cross processes). torch is imported only inside the worker, since it is an optional extra.

Inputs are integer-valued float64, so every summation order gives the exact sum and StragglAR's result
must equal ``all_reduce``'s bit for bit. A float32 run with Gaussian inputs checks the other case: the two
results may differ by rounding, and must lie within ``(n-1)·eps32·Σ|x|`` of each other, elementwise (each is
within half that of the exact sum).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from data_plane.collectives.schedule import Op, Round, stragglar_schedule

__all__ = ["launch", "stragglar_allreduce"]


def launch(n: int, numel: int, repeats: int, seed: int = 0, delay_factor: tuple[float, float] = (4.0, 6.0),
           timeout_s: float = 300.0) -> dict[str, Any]:
    """Run ``repeats`` timed StragglAR and all_reduce rounds on ``n`` processes; return rank 0's report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        args = [sys.executable, "-m", "data_plane.collectives.gloo", "--world", str(n), "--store",
                str(Path(tmp) / "store"), "--out", str(out), "--numel", str(numel), "--repeats", str(repeats),
                "--seed", str(seed), "--delay-factor", str(delay_factor[0]), str(delay_factor[1])]
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
        procs = [subprocess.Popen([*args, "--rank", str(r)], env=env) for r in range(n)]
        deadline = time.monotonic() + timeout_s
        try:
            codes = [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if any(codes):
            raise RuntimeError(f"gloo workers exited with {codes}")
        return json.loads(out.read_text())


def _play(rounds: tuple[Round, ...], rank: int, chunks: Any, peers: Sequence[int] | None = None) -> None:
    """Play ``rounds`` as logical rank ``rank``; ``peers[logical]`` is the process-group rank of each logical
    rank (default: the same)."""
    import torch.distributed as dist

    def peer(logical: int) -> int:
        return logical if peers is None else peers[logical]

    for transfers in rounds:
        send = [tr for tr in transfers if tr.src == rank]
        recv = [tr for tr in transfers if tr.dst == rank]
        if not send and not recv:
            continue
        reqs = [dist.isend(chunks[tr.chunk].clone(), peer(tr.dst)) for tr in send]  # the round-start state
        incoming = [(tr, chunks[tr.chunk].new_empty(chunks.shape[1])) for tr in recv]
        reqs += [dist.irecv(buf, peer(tr.src)) for tr, buf in incoming]
        for req in reqs:
            req.wait()
        for tr, buf in incoming:
            if tr.op is Op.REDUCE:
                chunks[tr.chunk] += buf
            else:
                chunks[tr.chunk].copy_(buf)


def stragglar_allreduce(x: Any, peers: Sequence[int], me: int) -> Any:
    """The sum of every process's ``x`` (a 1-D tensor) by the StragglAR schedule over the process-group ranks
    ``peers`` in logical order, the expected straggler last (:meth:`Selector.form_group`); ``me`` is this
    process's rank. A ready rank starts the ReduceScatter at once; the straggler joins at the completion."""
    import torch

    n = len(peers)
    logical = list(peers).index(me)
    schedule = stragglar_schedule(n)
    width = -(-x.numel() // (n - 1))
    buf = torch.zeros((n - 1) * width, dtype=x.dtype, device=x.device)
    buf[: x.numel()] = x
    chunks = buf.view(n - 1, width)
    if logical != schedule.straggler:
        _play(schedule.prephase, logical, chunks, peers)
    _play(schedule.completion, logical, chunks, peers)
    return buf[: x.numel()]


def _stragglar(x: Any, rank: int, n: int, delay_s: float, prephase_only: bool = False) -> tuple[Any, float]:
    """StragglAR AllReduce of ``x``; the last rank sleeps ``delay_s`` first. Returns (result, arrival time
    of this rank at the collective)."""
    import torch

    schedule = stragglar_schedule(n)
    width = -(-x.numel() // (n - 1))
    buf = torch.zeros((n - 1) * width, dtype=x.dtype)
    buf[: x.numel()] = x
    chunks = buf.view(n - 1, width)
    if rank == schedule.straggler:
        time.sleep(delay_s)
    arrival = time.perf_counter()
    if rank != schedule.straggler:
        _play(schedule.prephase, rank, chunks)
    if not prephase_only:
        _play(schedule.completion, rank, chunks)
    return buf[: x.numel()], arrival


def _allreduce(x: Any, rank: int, n: int, delay_s: float) -> tuple[Any, float]:
    import torch.distributed as dist

    y = x.clone()
    if rank == n - 1:
        time.sleep(delay_s)
    arrival = time.perf_counter()
    dist.all_reduce(y)
    return y, arrival


def _after_arrival(rank: int, n: int, arrival: float, finish: float) -> float:
    """Seconds from the straggler's arrival to the last rank's finish (perf_counter is system-wide)."""
    import torch
    import torch.distributed as dist

    times = [torch.zeros(2, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(times, torch.tensor([arrival, finish], dtype=torch.float64))
    return max(float(t[1]) for t in times) - float(times[n - 1][0])


def _worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, n = args.rank, args.world
    store = dist.FileStore(args.store, n)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n)
    rng = np.random.default_rng([args.seed, rank])
    x64 = torch.from_numpy(rng.integers(-(2**20), 2**20, args.numel).astype(np.float64))
    x32 = torch.from_numpy(rng.standard_normal(args.numel).astype(np.float32))

    _stragglar(x64, rank, n, 0.0)  # warm-up: connections between every pair used
    _allreduce(x64, rank, n, 0.0)
    dist.barrier()
    start = time.perf_counter()
    _stragglar(x64, rank, n, 0.0, prephase_only=True)
    t_rs = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(t_rs, op=dist.ReduceOp.MAX)

    factors = np.random.default_rng(args.seed).uniform(*args.delay_factor, args.repeats)
    runs = []
    identical = True
    for factor in factors:
        delay = float(factor) * float(t_rs)
        row = {"delay_s": delay}
        for name, fn in (("stragglar", _stragglar), ("allreduce", _allreduce)):
            dist.barrier()
            result, arrival = fn(x64, rank, n, delay)
            row[name] = _after_arrival(rank, n, arrival, time.perf_counter())
            if name == "stragglar":
                mine = result
        identical &= bool(torch.equal(mine, result))
        runs.append(row)

    sar32, _ = _stragglar(x32, rank, n, 0.0)
    ar32, _ = _allreduce(x32, rank, n, 0.0)
    magnitude = x32.abs().double()
    dist.all_reduce(magnitude)
    bound = (n - 1) * float(np.finfo(np.float32).eps) * magnitude
    diff = (sar32.double() - ar32.double()).abs()
    flags = torch.tensor([float(identical), float(bool((diff <= bound).all())), float(diff.max()),
                          float((diff / magnitude.clamp_min(1e-30)).max())], dtype=torch.float64)
    summary = [torch.zeros(4, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(summary, flags)
    if rank == 0:
        report = {
            "n": n, "numel": args.numel, "completion_rounds": stragglar_schedule(n).completion_rounds,
            "reduce_scatter_s": float(t_rs), "runs": runs,
            "float64_bit_identical": all(bool(s[0]) for s in summary),
            "float32_within_bound": all(bool(s[1]) for s in summary),
            "float32_max_abs_diff": max(float(s[2]) for s in summary),
            "float32_max_rel_diff": max(float(s[3]) for s in summary),
        }
        Path(args.out).write_text(json.dumps(report, indent=1))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--numel", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delay-factor", type=float, nargs=2, default=(4.0, 6.0))
    _worker(parser.parse_args())


if __name__ == "__main__":
    main()
