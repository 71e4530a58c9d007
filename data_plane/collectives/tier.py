"""The sharded aggregation tier: N aggregator shards, real processes, that fold their cohorts and AllReduce.

A round's updates are split into cohorts, one per shard. Each shard folds its cohort weighted by
``num_samples`` with the data plane's own arithmetic (:class:`data_plane.fold.WeightedSum`); the shards
then add their partial sums and weights with the algorithm the :class:`Selector` picks for the step
(gloo's or NCCL's ``all_reduce`` for Ring/RHD, StragglAR when a persistent straggler makes it win), fed
by a :class:`StragglerTracker` of the shards' arrivals (:mod:`data_plane.collectives.tier_worker`).

The result is the single-process aggregate: bit-identical when every step of the arithmetic is exact
(integer-valued updates, power-of-two weights, sums below 2**53): then each shard's sums in the common
unit are exact, and so is their sum in any order. Otherwise the two round
differently, each within ``(K + n)·eps64`` of the exact weighted sum (``K`` updates, ``n`` shards) relative
to ``Σ w·|x| / Σ w``; after the cast to float32 they agree within one float32 rounding of that.

Inputs are validated here, before any process starts: the shard count, each update (safetensors, the
wire format; finite; one schema across all cohorts; at most :data:`MAX_UPDATE_BYTES`), each weight, the
step count and the injected delay. Shards are local processes meeting over a file store, each bounded by
``timeout_s``: a shard that does not finish in time is killed with its peers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from data_plane.collectives.cost import LinkCost
from data_plane.collectives.process_group import default_backend
from data_plane.collectives.selector import Selector
from data_plane.tensors import Schema, check_finite, decode, schema
from data_plane.updates import Aggregate, is_real
from propius.specs import MAX_NUM_SAMPLES

__all__ = [
    "LOOPBACK",
    "MAX_COHORT",
    "MAX_DELAY_S",
    "MAX_SHARDS",
    "MAX_STEPS",
    "MAX_UPDATE_BYTES",
    "Mode",
    "TierError",
    "TierRun",
    "TierStep",
    "run_tier",
]

MAX_SHARDS = 16
MAX_COHORT = 4096
MAX_UPDATE_BYTES = 256 << 20
MAX_STEPS = 64
MAX_DELAY_S = 30.0
LOOPBACK = LinkCost.of(latency_us=50.0, bandwidth_gbps=10.0)
"""Loopback TCP between processes of one host, as gloo sees it on the project's machines (order of magnitude:
tens of µs per message, ~1 GB/s per stream); the selector's default when no fabric names the links."""

Mode = Literal["auto", "allreduce", "stragglar"]
"""A step's algorithm: the selector's choice, gloo's/NCCL's own all_reduce, or StragglAR."""
_MODES = ("auto", "allreduce", "stragglar")


class TierError(ValueError):
    """A request the tier refuses; ``field`` names the argument at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class TierStep:
    """One profiled step (``ProfilerStep#<step>``): the algorithm run and why, and what it measured."""

    step: int
    mode: str
    algorithm: str  # "allreduce" or "stragglar"
    selected: str  # the selector's choice for the step (ring, rhd or stragglar)
    predicted_s: dict[str, float]
    predicted_delay_s: float
    order: list[int]  # the group's logical order (process ranks), the expected straggler last
    lag_s: dict[str, float]  # each shard's arrival after the first one's
    last_arrival: int
    after_arrival_s: float  # from the last shard's arrival to the last shard's finish
    step_s: float


@dataclass(frozen=True)
class TierRun:
    aggregate: Aggregate
    steps: list[TierStep]
    shards: int
    backend: str
    bytes: int  # the packed partial sum each shard contributes (float64 sums and the weight)
    traces: dict[int, Path]  # rank -> torch.profiler Chrome trace, as recorded
    straggler: int | None
    delay_s: float
    link: LinkCost
    max_abs_diff_between_steps: float
    report: dict[str, Any] = field(repr=False)


def _check_weight(weight: object, where: str) -> float:
    if not is_real(weight) or not math.isfinite(float(weight)) or not 0 < float(weight) <= MAX_NUM_SAMPLES:
        raise TierError(where, f"weight must be in (0, {MAX_NUM_SAMPLES:g}], got {weight!r}")
    return float(weight)


def _validate(cohorts: Sequence[Sequence[tuple[bytes, float]]]) -> Schema:
    if not MAX_SHARDS >= len(cohorts) >= 2:
        raise TierError("shards", f"between 2 and {MAX_SHARDS} cohorts (one per shard), got {len(cohorts)}")
    reference: Schema | None = None
    for shard, cohort in enumerate(cohorts):
        if not MAX_COHORT >= len(cohort) >= 1:
            raise TierError(f"cohorts[{shard}]", f"between 1 and {MAX_COHORT} updates, got {len(cohort)}")
        for index, (payload, weight) in enumerate(cohort):
            where = f"cohorts[{shard}][{index}]"
            _check_weight(weight, where)
            tensors = decode(payload, max_bytes=MAX_UPDATE_BYTES, field=where)
            check_finite(tensors, field=where)
            found = schema(tensors)
            if reference is None:
                reference = found
            elif found != reference:
                raise TierError(where, "schema mismatch: tensor names, dtypes or shapes differ from the first update")
    assert reference is not None
    return reference


def run_tier(cohorts: Sequence[Sequence[tuple[bytes, float]]], workdir: Path, *, steps: int = 5,
             modes: Sequence[Mode] = ("auto",), straggler: int | None = None, delay_s: float = 0.0,
             link: LinkCost = LOOPBACK, selector: Selector | None = None, backend: str | None = None,
             timeout_s: float = 120.0) -> TierRun:
    """Aggregate ``cohorts`` (per shard: (safetensors payload, num_samples) pairs) on ``len(cohorts)`` shard
    processes, ``steps`` profiled steps per mode, shard ``straggler`` late by ``delay_s`` every step.

    ``workdir`` (created, must be empty) keeps the run: the plan, the cohorts, each rank's profiler trace
    ``rank<N>.trace.json``, the mean and the report. ``backend``: gloo, or nccl (default when CUDA has a
    device per shard). Raises TierError for a refused request, RuntimeError when a shard fails."""
    _validate(cohorts)
    n = len(cohorts)
    if not MAX_STEPS >= steps >= 1:
        raise TierError("steps", f"between 1 and {MAX_STEPS}, got {steps}")
    if not modes or any(mode not in _MODES for mode in modes) or len(modes) * steps > MAX_STEPS:
        raise TierError("modes", f"a non-empty list of {', '.join(_MODES)}, at most {MAX_STEPS} steps in all")
    if straggler is not None and not 0 <= straggler < n:
        raise TierError("straggler", f"a shard index in [0, {n}), got {straggler}")
    if not (math.isfinite(delay_s) and 0 <= delay_s <= MAX_DELAY_S) or (delay_s > 0 and straggler is None):
        raise TierError("delay_s", f"in [0, {MAX_DELAY_S:g}] s, and only with a straggler shard, got {delay_s}")
    backend = backend or _default_backend(n)
    if backend not in ("gloo", "nccl"):
        raise TierError("backend", f"gloo or nccl, got {backend!r}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise TierError("workdir", f"{workdir} is not empty")
    selector = selector or Selector()

    for shard, cohort in enumerate(cohorts):
        folder = workdir / f"cohort{shard}"
        folder.mkdir()
        for index, (payload, _) in enumerate(cohort):
            (folder / f"update{index}.safetensors").write_bytes(bytes(payload))
    plan = {"world": n, "backend": backend, "steps": steps, "modes": list(modes),
            "weights": [[float(w) for _, w in cohort] for cohort in cohorts],
            "straggler": straggler if straggler is not None else -1, "delay_s": delay_s,
            "link": asdict(link), "selector": asdict(selector), "collective_timeout_s": timeout_s}
    (workdir / "plan.json").write_text(json.dumps(plan))
    _launch(workdir, n, timeout_s)
    for shard in range(n):
        shutil.rmtree(workdir / f"cohort{shard}")

    report = json.loads((workdir / "report.json").read_text())
    tensors = decode((workdir / "mean.safetensors").read_bytes())
    aggregate = Aggregate(tensors=tensors, total_weight=report["total_weight"], results=report["results"],
                          metrics={})
    return TierRun(aggregate=aggregate, steps=[TierStep(**step) for step in report["steps"]], shards=n,
                   backend=backend, bytes=report["bytes"],
                   traces={rank: workdir / f"rank{rank}.trace.json" for rank in range(n)},
                   straggler=straggler, delay_s=delay_s, link=link,
                   max_abs_diff_between_steps=report["max_abs_diff_between_steps"], report=report)


def _default_backend(n: int) -> str:
    try:
        return default_backend(n)
    except ImportError as error:
        raise TierError("backend", "the tier runs on torch.distributed: install the client extra") from error


def _launch(workdir: Path, n: int, timeout_s: float) -> None:
    """Start the shards and wait for all of them; kill every one on a failure or at the deadline."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "data_plane.collectives.tier_worker", "--run", str(workdir)]
    logs = [workdir / f"shard{rank}.log" for rank in range(n)]
    procs = []
    for rank, log in enumerate(logs):
        with log.open("w") as out:
            procs.append(subprocess.Popen([*args, "--rank", str(rank)], env=env, stdout=out, stderr=out))
    deadline = time.monotonic() + timeout_s
    failed: list[str] = []
    try:
        for rank, proc in enumerate(procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failed.append(f"shard {rank} did not finish within {timeout_s:g} s")
                break
            if proc.returncode:
                failed.append(f"shard {rank} exited with {proc.returncode}: {logs[rank].read_text()[-2000:]}")
                break
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if failed:
        raise RuntimeError("; ".join(failed))
