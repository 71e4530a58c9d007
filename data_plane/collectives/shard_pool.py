"""A job's live aggregator shards: N long-lived processes, started once and reused round after round.

:class:`ShardPool` starts ``n`` shard processes (:mod:`data_plane.collectives.live_worker`), each joined to
the control plane by a socket pair that carries length-prefixed frames (:mod:`.frames`: a JSON header and
the update's safetensors bytes, no pickle). Starting costs a torch import per process (seconds, tens of
seconds on a loaded host), so the processes live as long as the job; the pool's first fold waits for them.
Each client's updates go to shard ``blake2b(client_id) mod n`` (deterministic, stable across rounds and
control-plane restarts; the cohorts are as balanced as the hash makes them). At the close, the pool's
:class:`StragglerTracker` (kept across rounds: the straggler it learns is the shard whose cohort finishes
last, round after round) and :class:`Selector` pick the AllReduce algorithm and group order from the
shards' cohort completion times of earlier rounds and the link cost of the job's placement; every shard
then runs the same collective.

:class:`ShardPools` bounds the processes of one control plane: a pool that would go over
``max_processes`` is refused (:class:`ShardsRefused`, with the reason), as is one where torch is missing; the
caller falls back to the single-process aggregator. A pool whose process dies or does not answer in time
is broken for good (:class:`ShardsFailed`): its processes are killed and the job is refused a pool again.

Each shard records every reduce with torch.profiler (:mod:`.live_worker`); :meth:`ShardPool.recorded`
reads the last :data:`STEPS_KEPT` of them with the pool's own record of each (:class:`PoolTrace`), which a
completed job's trace export turns into a CCL-Bench data point of real collectives. The traces go with the
pool's folder when it stops: a pool started again after a control-plane restart records afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_plane.collectives.cost import LinkCost
from data_plane.collectives.frames import read_frame, write_frame
from data_plane.collectives.live_worker import step_trace_name
from data_plane.collectives.schedule import stragglar_schedule
from data_plane.collectives.selector import Algorithm, Selector, StragglerTracker
from data_plane.collectives.tier import LOOPBACK
from data_plane.tensors import Schema, decode

__all__ = ["PoolStep", "PoolTrace", "ShardPool", "ShardPools", "ShardsFailed", "ShardsRefused"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 300.0
"""Processes to import torch and join the group; generous, since a loaded host takes tens of seconds."""
REPLY_TIMEOUT_S = 300.0
"""A fold or a reduce that takes longer breaks the pool (and is the collectives' own timeout)."""
STEPS_KEPT = 64
"""Reduces a pool remembers (:class:`PoolStep`) and each shard keeps the trace of."""


class ShardsRefused(RuntimeError):
    """No pool for this job here (over the plane's bound, torch missing, an earlier pool broke): fall back."""


class ShardsFailed(RuntimeError):
    """The pool broke (a process died or stopped answering): the updates folded in it are lost."""


@dataclass(frozen=True)
class PoolStep:
    """One reduce: what the selector chose from the history before it, and the cohorts' lags it observed."""

    step: int  # the pool's count of reduces, from 1: the ProfilerStep number in the shards' traces
    round: int
    attempt: int
    algorithm: str  # what ran: allreduce or stragglar
    selected: str  # the selector's choice: ring, rhd or stragglar
    order: list[int]
    lag_s: dict[int, float]  # each shard's cohort completion after the first shard's
    reduce_s: float
    total_weight: float  # the samples the step aggregated


@dataclass(frozen=True)
class PoolTrace:
    """What a job's shards recorded (:meth:`ShardPool.recorded`): its last reduces, and per rank one
    torch.profiler Chrome trace of each, oldest first, as recorded."""

    job_id: str
    shards: int
    backend: str
    link: LinkCost
    steps: list[PoolStep]
    documents: dict[int, list[dict]]
    model: Schema
    bytes: int  # the packed partial sum each shard contributes (float64 sums and the weight)


class _Conn:
    """One shard's socket: request/answer, one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.lock = asyncio.Lock()

    async def ask(self, header: dict, body: bytes | memoryview = b"") -> tuple[dict, bytes]:
        async with self.lock:
            await write_frame(self.writer, header, body)
            return await read_frame(self.reader)


class ShardPool:
    def __init__(self, job_id: str, n: int, workdir: Path, *, link: LinkCost = LOOPBACK, backend: str = "auto",
                 selector: Selector | None = None) -> None:
        self.job_id, self.n, self.link, self.backend = job_id, n, link, backend
        self.selector = selector or Selector()
        self.tracker = StragglerTracker()
        self.steps: deque[PoolStep] = deque(maxlen=STEPS_KEPT)
        self.workdir = workdir
        self.pids: list[int] = []
        self._procs: list[asyncio.subprocess.Process] = []
        self._conns: list[_Conn] = []
        self._ready: asyncio.Task[None] | None = None
        self._rounds = stragglar_schedule(n).completion_rounds if n >= 3 else None
        self.broken = ""
        self._generation = 0
        self._reduces = 0
        self.model: Schema = {}  # the last reduce's model layout and packed size
        self.bytes = 0
        self.backend_used = ""  # what the shards joined with (gloo or nccl), once they are ready

    def generation(self) -> int:
        """A fresh number for one aggregator of an attempt: an attempt folded again (taken over) never adds
        to what a shard kept of it before."""
        self._generation += 1
        return self._generation

    def shard_of(self, client_id: str) -> int:
        """The client's cohort: a stable hash of its id, mod n."""
        return int.from_bytes(hashlib.blake2b(client_id.encode(), digest_size=8).digest(), "big") % self.n

    async def start(self) -> None:
        """Start the processes; they import torch and join the group in the background (:meth:`ready`)."""
        env = {**os.environ, "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
               "OMP_NUM_THREADS": "1"}
        store, traces = self.workdir / "store", self.workdir / "traces"
        traces.mkdir(exist_ok=True)
        for rank in range(self.n):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with (self.workdir / f"shard{rank}.log").open("w") as out:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "data_plane.collectives.live_worker", "--fd", str(theirs.fileno()),
                    "--rank", str(rank), "--world", str(self.n), "--store", str(store), "--backend", self.backend,
                    "--timeout-s", str(REPLY_TIMEOUT_S), "--trace-dir", str(traces), "--keep-traces", str(STEPS_KEPT),
                    pass_fds=(theirs.fileno(),), env=env,
                    stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out)
            theirs.close()
            self._procs.append(proc)
            self.pids.append(proc.pid)
            self._conns.append(_Conn(*await asyncio.open_unix_connection(sock=ours)))
        self._ready = asyncio.ensure_future(self._await_ready())

    async def _await_ready(self) -> None:
        async def one(rank: int) -> None:
            header, _ = await read_frame(self._conns[rank].reader)
            if header.get("op") != "ready":
                raise ShardsFailed(f"shard {rank} said {header!r} instead of ready")
            self.backend_used = str(header.get("backend", ""))

        await asyncio.wait_for(asyncio.gather(*(one(rank) for rank in range(self.n))), START_TIMEOUT_S)

    async def ready(self) -> None:
        """Wait until every shard has joined the group; ShardsFailed if one cannot."""
        if self.broken:
            raise ShardsFailed(self.broken)
        assert self._ready is not None, "start() first"
        try:
            await asyncio.shield(self._ready)
        except Exception as error:  # noqa: BLE001 - any way of not starting breaks the pool
            raise await self._broken(f"the shards did not start: {error!r}") from error

    async def fold(self, shard: int, round_: int, attempt: int, generation: int, payload: bytes | memoryview,
                   weight: float) -> None:
        """Fold a validated update into ``shard``'s partial sum of the attempt."""
        await self.ready()
        header = {"op": "fold", "round": round_, "attempt": attempt, "generation": generation, "weight": weight}
        reply, _ = await self._ask(shard, header, memoryview(payload).cast("B"))
        if not reply.get("ok"):
            raise await self._broken(f"shard {shard} refused an update: {reply.get('error')}")

    async def reduce(self, round_: int, attempt: int, generation: int, counts: list[int], model: Schema,
                     arrivals: dict[int, float]) -> tuple[dict[str, np.ndarray], float]:
        """AllReduce the attempt's partial sums; the mean (in each tensor's dtype) and the total weight.

        ``counts``: the folds the caller sent each shard (checked by the shard); ``arrivals``: each shard's
        cohort completion time, observed after the collective so it informs the next rounds' choice."""
        await self.ready()
        size = 8 * (sum(int(np.prod(shape)) for _, shape in model.values()) + 1)
        choice = self.selector.choose(self.n, size, self.link, self.tracker, self._rounds)
        order = [int(rank) for rank in self.selector.form_group(list(range(self.n)), self.tracker)]
        algorithm = "stragglar" if choice.algorithm is Algorithm.STRAGGLAR else "allreduce"
        layout = [[name, dtype, list(shape)] for name, (dtype, shape) in model.items()]
        self._reduces += 1
        step = self._reduces
        started = time.perf_counter()
        replies = await asyncio.gather(*(self._ask(rank, {
            "op": "reduce", "round": round_, "attempt": attempt, "generation": generation, "step": step,
            "expected": counts[rank], "schema": layout, "algorithm": algorithm, "order": order})
            for rank in range(self.n)))
        errors = [reply.get("error") for reply, _ in replies if not reply.get("ok")]
        if errors:
            raise await self._broken("; ".join(map(str, errors)))
        self.tracker.observe(arrivals)
        first = min(arrivals.values())
        head, body = replies[0]
        self.model, self.bytes = model, size
        self.steps.append(PoolStep(step, round_, attempt, algorithm, choice.algorithm.value, order,
                                   {rank: at - first for rank, at in arrivals.items()},
                                   time.perf_counter() - started, float(head["total_weight"])))
        return decode(body), float(head["total_weight"])

    def recorded(self) -> PoolTrace | None:
        """The pool's remembered reduces with each shard's trace of them (JSON documents as recorded); None
        before the first reduce. Steps a shard has no trace of (a failed write) are left out for every rank."""
        if not self.steps:
            return None
        folder = self.workdir / "traces"
        steps = [step for step in self.steps
                 if all((folder / step_trace_name(rank, step.step)).is_file() for rank in range(self.n))]
        documents = {rank: [json.loads((folder / step_trace_name(rank, step.step)).read_text()) for step in steps]
                     for rank in range(self.n)}
        return PoolTrace(self.job_id, self.n, self.backend_used, self.link, steps, documents, self.model, self.bytes)

    async def _ask(self, rank: int, header: dict, body: bytes | memoryview = b"") -> tuple[dict, bytes]:
        if self.broken:
            raise ShardsFailed(self.broken)
        try:
            return await asyncio.wait_for(self._conns[rank].ask(header, body), REPLY_TIMEOUT_S)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as error:
            raise await self._broken(f"shard {rank} did not answer: {error!r}") from error

    async def _broken(self, reason: str) -> ShardsFailed:
        """Mark the pool broken for good and stop its processes; the error to raise."""
        if not self.broken:
            self.broken = reason
            log.error("job %s: aggregator shards broken: %s", self.job_id, reason, extra={"job_id": self.job_id})
        await self.stop()
        return ShardsFailed(self.broken)

    async def stop(self) -> None:
        """Close the sockets (a shard exits at end of stream), wait briefly, kill what is left."""
        if self._ready is not None and not self._ready.done():
            self._ready.cancel()
        for conn in self._conns:
            with contextlib.suppress(Exception):
                conn.writer.close()
        for proc in self._procs:
            if proc.returncode is None:
                try:
                    await asyncio.wait_for(proc.wait(), 5.0)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        self._procs, self._conns = [], []
        await asyncio.to_thread(shutil.rmtree, self.workdir, True)


class ShardPools:
    """The live pools of one control plane, at most ``max_processes`` shard processes in all."""

    def __init__(self, workdir: Path, max_processes: int, backend: str = "auto") -> None:
        self.workdir, self.max_processes, self.backend = workdir, max_processes, backend
        self._pools: dict[str, ShardPool] = {}
        self._refused: dict[str, str] = {}  # job -> why it gets no pool here (kept: refused once, told once)
        self._lock = asyncio.Lock()

    @property
    def processes(self) -> int:
        """Shard processes running (a broken pool's were stopped when it broke)."""
        return sum(pool.n for pool in self._pools.values() if not pool.broken)

    def get(self, job_id: str) -> ShardPool | None:
        return self._pools.get(job_id)

    def refused(self, job_id: str) -> str:
        """Why the job has no pool here ('' if it was never refused)."""
        return self._refused.get(job_id, "")

    async def acquire(self, job_id: str, n: int, link: LinkCost) -> ShardPool:
        """The job's pool, started on first use; ShardsRefused (with the reason) when it cannot have one."""
        async with self._lock:
            pool = self._pools.get(job_id)
            if pool is not None and not pool.broken:
                return pool
            if pool is not None:
                self._refused[job_id] = f"its aggregator shards broke ({pool.broken})"
                del self._pools[job_id]
            if reason := self._refused.get(job_id, ""):
                raise ShardsRefused(reason)
            if importlib.util.find_spec("torch") is None:
                reason = "torch is not installed (the client extra)"
            elif self.processes + n > self.max_processes:
                reason = (f"{n} shard processes would exceed this plane's bound of {self.max_processes} "
                          f"({self.processes} running)")
            if reason:
                self._refused[job_id] = reason
                raise ShardsRefused(reason)
            self.workdir.mkdir(parents=True, exist_ok=True)
            pool = ShardPool(job_id, n, Path(tempfile.mkdtemp(prefix="pool-", dir=self.workdir)), link=link,
                             backend=self.backend)
            try:
                await pool.start()
            except BaseException:
                await pool.stop()
                raise
            self._pools[job_id] = pool
            log.info("job %s: started %d aggregator shards (pids %s)", job_id, n, pool.pids,
                     extra={"job_id": job_id})
            return pool

    async def release(self, job_id: str) -> None:
        """Stop the job's pool (a completed or cancelled job) and forget it."""
        self._refused.pop(job_id, None)
        pool = self._pools.pop(job_id, None)
        if pool is not None:
            await pool.stop()

    async def retire(self, live: set[str]) -> None:
        """Stop the pools of jobs no longer ``live`` (finished elsewhere, expired)."""
        for job_id in [job_id for job_id in self._pools if job_id not in live]:
            await self.release(job_id)
        for job_id in [job_id for job_id in self._refused if job_id not in live]:
            del self._refused[job_id]

    async def close(self) -> None:
        for job_id in list(self._pools):
            await self.release(job_id)
