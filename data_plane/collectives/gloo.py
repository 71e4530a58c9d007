"""Run a StragglAR schedule with point-to-point transfers over gloo in real local processes, against gloo's own
``all_reduce``, with one rank (the last) late by a seeded delay of several ReduceScatter times.

:func:`launch` starts ``n`` fresh interpreters (``python -m data_plane.collectives.gloo``) that meet over a
file store and talk over loopback; rank 0 writes the measurements as JSON, which :func:`launch` reads back
(no pickles cross processes). torch is imported only inside the worker, since it is an optional extra.
The ready ranks' ReduceScatter runs while the straggler sleeps, so only the completion rounds are exposed;
timed repeats interleave StragglAR and ``all_reduce``, alternating which goes first, so a shared machine's
slow spells hit both alike.

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


class _Player:
    """One rank's part of a schedule over a preallocated ``(n-1, width)`` buffer, built once and replayed.

    Per round the rank's sends (views of its chunks: a round reads the state at its start) and its one
    receive go out as one ``batch_isend_irecv``; a copy lands straight in its chunk unless that chunk is also
    being sent this round, a reduce lands in a scratch row and is added after the round's wait. Rounds the
    rank sits out are skipped. Nothing is allocated while playing."""

    def __init__(self, rounds: tuple[Round, ...], rank: int, chunks: Any, peers: Sequence[int] | None = None) -> None:
        import torch.distributed as dist

        def peer(logical: int) -> int:  # the process-group rank of a logical rank (default: the same)
            return logical if peers is None else peers[logical]

        self.chunks = chunks
        self.scratch = chunks.new_empty(chunks.shape[1])
        self.steps: list[tuple[list[Any], tuple[Op, int] | None]] = []
        for transfers in rounds:
            sends = [tr for tr in transfers if tr.src == rank]
            receives = [tr for tr in transfers if tr.dst == rank]
            if not sends and not receives:
                continue
            ops = [dist.P2POp(dist.isend, chunks[tr.chunk], peer(tr.dst)) for tr in sends]
            after = None
            for tr in receives:  # at most one: check_schedule refuses a rank receiving twice in a round
                direct = tr.op is Op.COPY and all(s.chunk != tr.chunk for s in sends)
                ops.append(dist.P2POp(dist.irecv, chunks[tr.chunk] if direct else self.scratch, peer(tr.src)))
                after = None if direct else (tr.op, tr.chunk)
            self.steps.append((ops, after))

    def play(self) -> None:
        import torch.distributed as dist

        for ops, after in self.steps:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            if after is not None:
                op, chunk = after
                if op is Op.REDUCE:
                    self.chunks[chunk].add_(self.scratch)
                else:
                    self.chunks[chunk].copy_(self.scratch)


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
        _Player(schedule.prephase, logical, chunks, peers).play()
    _Player(schedule.completion, logical, chunks, peers).play()
    return buf[: x.numel()]


class _Stragglar:
    """StragglAR AllReduce of ``numel`` elements of ``dtype`` on this rank, with its buffer and players built
    once: the ready ranks' ReduceScatter (run while the straggler is late) and the completion rounds."""

    def __init__(self, rank: int, n: int, numel: int, dtype: Any) -> None:
        import torch

        self.rank, self.numel = rank, numel
        self.schedule = stragglar_schedule(n)
        width = -(-numel // (n - 1))
        self.buf = torch.zeros((n - 1) * width, dtype=dtype)
        chunks = self.buf.view(n - 1, width)
        self.prephase = _Player(self.schedule.prephase, rank, chunks)
        self.completion = _Player(self.schedule.completion, rank, chunks)

    def load(self, x: Any) -> None:
        self.buf[: self.numel].copy_(x)
        self.buf[self.numel:].zero_()

    def run(self, delay_s: float, prephase_only: bool = False) -> float:
        """The AllReduce of the loaded input, in place; the straggler sleeps ``delay_s`` first. Returns this
        rank's arrival time at the collective."""
        if self.rank == self.schedule.straggler:
            time.sleep(delay_s)
        arrival = time.perf_counter()
        if self.rank != self.schedule.straggler:
            self.prephase.play()
        if not prephase_only:
            self.completion.play()
        return arrival

    @property
    def result(self) -> Any:
        return self.buf[: self.numel]


def _allreduce(y: Any, rank: int, n: int, delay_s: float) -> float:
    """gloo's own all_reduce of ``y`` in place; the last rank sleeps ``delay_s`` first. Returns the arrival."""
    import torch.distributed as dist

    if rank == n - 1:
        time.sleep(delay_s)
    arrival = time.perf_counter()
    dist.all_reduce(y)
    return arrival


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
    sar, y = _Stragglar(rank, n, args.numel, torch.float64), torch.empty_like(x64)

    for _ in range(2):  # warm-up: every pair's connection used, both paths run
        sar.load(x64)
        sar.run(0.0)
        y.copy_(x64)
        _allreduce(y, rank, n, 0.0)
    samples = []
    for _ in range(3):
        sar.load(x64)
        dist.barrier()
        start = time.perf_counter()
        sar.run(0.0, prephase_only=True)
        samples.append(time.perf_counter() - start)
    t_rs = torch.tensor([sorted(samples)[1]], dtype=torch.float64)
    dist.all_reduce(t_rs, op=dist.ReduceOp.MAX)

    factors = np.random.default_rng(args.seed).uniform(*args.delay_factor, args.repeats)
    runs = []
    identical = True
    for i, factor in enumerate(factors):
        delay = float(factor) * float(t_rs)
        row = {"delay_s": delay}
        order = ("stragglar", "allreduce") if i % 2 == 0 else ("allreduce", "stragglar")  # interleaved
        for name in order:
            if name == "stragglar":
                sar.load(x64)
                dist.barrier()
                arrival = sar.run(delay)
            else:
                y.copy_(x64)
                dist.barrier()
                arrival = _allreduce(y, rank, n, delay)
            row[name] = _after_arrival(rank, n, arrival, time.perf_counter())
        identical &= bool(torch.equal(sar.result, y))
        runs.append(row)

    sar32, ar32 = _Stragglar(rank, n, args.numel, torch.float32), x32.clone()
    sar32.load(x32)
    sar32.run(0.0)
    _allreduce(ar32, rank, n, 0.0)
    magnitude = x32.abs().double()
    dist.all_reduce(magnitude)
    bound = (n - 1) * float(np.finfo(np.float32).eps) * magnitude
    diff = (sar32.result.double() - ar32.double()).abs()
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
