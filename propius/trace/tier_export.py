"""Sharded aggregation as a CCL-Bench data point: a benchmark run (:func:`data_plane.collectives.tier.run_tier`,
:func:`export_tier_run`) or a live job's aggregator shards (:class:`data_plane.collectives.shard_pool.PoolTrace`,
:func:`export_pool_trace`, written when a sharded job completes).

Unlike a FL job's data point (:mod:`propius.trace.export`, spans the control plane measured, written as
synthetic kernels), every event here is one torch.profiler recorded in a shard process: the steps
(``ProfilerStep#<n>``), the ops, the gloo collectives. Two things are changed, both mechanical:

- **one clock**: every recorded document's ``ts`` (a live shard records one document per reduce, each with
  its own ``baseTimeNanoseconds``; Kineto's ``unix_ns = baseTimeNanoseconds + 1000·ts``) is moved onto a
  common origin (the earliest event of the run), and a rank's documents become one, so the ranks' steps
  line up; durations are untouched, and ``baseTimeNanoseconds`` names the new origin;
- **the CPU's kernels** (gloo runs only): CCL-Bench's tools read ``cat: kernel`` events only, and a CPU run
  records none. The events that are the shard's device work are recategorised ``kernel`` (with
  ``args.recorded_cat`` keeping what the profiler wrote): gloo's execution of each collective or transfer
  (``gloo:all_reduce``, ``gloo:send``, ``gloo:recv``, ``gloo:all_gather``, the analogue of a NCCL kernel)
  as communication, and the fold and pack ranges (:data:`COMPUTE_RANGES`) as compute. An NCCL run keeps its
  GPU kernels as recorded and changes no category.

Events without ``args`` get an empty one (the format requires the key). Nothing is added or dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from data_plane.collectives.cost import LinkCost
from data_plane.collectives.live_worker import PACK_RANGE
from data_plane.collectives.shard_pool import PoolTrace
from data_plane.collectives.tier import TierRun
from data_plane.collectives.tier_worker import COHORT_WAIT_RANGE, FOLD_RANGE, UNIT
from propius.fabric.model import Fabric
from propius.specs import JobSpec
from propius.trace.card import (
    Card,
    CommunicationLibrary,
    DataSection,
    Framework,
    Hardware,
    MetricSource,
    ModelExecutor,
    ModelSection,
    NetworkTopology,
    Parallelization,
    Workload,
    XpuSpec,
)
from propius.trace.export import write_data_point
from propius.trace.format import (
    STEP_CATEGORY,
    WORK_CATEGORY,
    data_point_name,
    is_communication,
    rank_file,
)

__all__ = ["COMPUTE_RANGES", "GRANULARITY", "TierRecord", "export_pool_trace", "export_tier_run", "rank_documents"]

GRANULARITY = "sharded_aggregation_step"
"""What one step is: every shard folds its cohort, then the shards AllReduce their partial sums."""
COMPUTE_RANGES = (FOLD_RANGE, PACK_RANGE)
"""The shards' profiler ranges that are compute on a CPU run (numpy work the profiler cannot see into)."""


@dataclass(frozen=True)
class TierRecord:
    """What a data point of the tier needs, from a benchmark run or from a live job's shards."""

    shards: int
    backend: str
    link: LinkCost
    bytes: int
    documents: dict[int, list[dict[str, Any]]]  # rank -> its recorded traces, oldest first
    steps: list[dict[str, Any]]  # per step: what ran and why (the card's collection notes)
    dtypes: list[np.dtype]
    num_params: int
    total_weight: float  # the samples the last step aggregated
    what_ran: str
    straggler: int | None = None
    delay_s: float = 0.0

    @classmethod
    def of_run(cls, run: TierRun) -> TierRecord:
        tensors = run.aggregate.tensors.values()
        return cls(run.shards, run.backend, run.link, run.bytes,
                   {rank: [json.loads(path.read_text())] for rank, path in sorted(run.traces.items())},
                   [{"step": s.step, "mode": s.mode, "algorithm": s.algorithm, "selected": s.selected,
                     "order": s.order, "last_arrival": s.last_arrival, "after_arrival_s": round(s.after_arrival_s, 6)}
                    for s in run.steps],
                   [a.dtype for a in tensors], sum(a.size for a in tensors), run.aggregate.total_weight,
                   f"{run.shards} aggregator shards, real processes over torch.distributed ({run.backend}), a "
                   "benchmark run; each step every shard folds its cohort (sample-weighted, float64) and the "
                   "shards AllReduce their partial sums and weights", run.straggler, run.delay_s)

    @classmethod
    def of_pool(cls, trace: PoolTrace) -> TierRecord:
        return cls(trace.shards, trace.backend, trace.link, trace.bytes, trace.documents,
                   [{"step": s.step, "round": s.round, "attempt": s.attempt, "algorithm": s.algorithm,
                     "selected": s.selected, "order": s.order,
                     "lag_s": {str(rank): round(lag, 6) for rank, lag in s.lag_s.items()},
                     "reduce_s": round(s.reduce_s, 6)} for s in trace.steps],
                   [np.dtype(dtype) for dtype, _ in trace.model.values()],
                   sum(int(np.prod(shape)) for _, shape in trace.model.values()), trace.steps[-1].total_weight,
                   f"job {trace.job_id}'s {trace.shards} live aggregator shards, real processes over "
                   f"torch.distributed ({trace.backend}); each step is one round's close: every shard packs the "
                   "partial sum it folded as its cohort's updates arrived, and the shards AllReduce them")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _is_cpu_kernel(event: dict[str, Any]) -> bool:
    name = str(event.get("name", ""))
    if event.get("cat") != STEP_CATEGORY:
        return False
    return name in COMPUTE_RANGES or (name.startswith("gloo:") and is_communication(name))


def _timed(event: dict[str, Any]) -> bool:
    return event.get("ph") != "M" and "ts" in event


def rank_documents(record: TierRecord) -> dict[int, dict[str, Any]]:
    """Each rank's recorded traces as one document, on one clock, with a CPU run's device work as kernels
    (module doc). A rank's later documents add their timed events only (their metadata repeats the first's)."""
    reference = min(document["baseTimeNanoseconds"] for recorded in record.documents.values() for document in recorded)
    origin = min(event["ts"] + (document["baseTimeNanoseconds"] - reference) / 1000
                 for recorded in record.documents.values() for document in recorded
                 for event in document["traceEvents"] if _timed(event))
    documents = {}
    for rank, recorded in sorted(record.documents.items()):
        events = []
        for index, document in enumerate(recorded):
            shift_us = (document["baseTimeNanoseconds"] - reference) / 1000
            for event in document["traceEvents"]:
                if index and not _timed(event):
                    continue
                event = dict(event)
                if _timed(event):
                    event["ts"] = round(event["ts"] + shift_us - origin, 3)
                if event.get("ph") == "X":
                    event.setdefault("args", {})
                    if record.backend == "gloo" and _is_cpu_kernel(event):
                        event["args"] = {**event["args"], "recorded_cat": event["cat"]}
                        event["cat"] = WORK_CATEGORY
                events.append(event)
        documents[rank] = {**recorded[0], "traceName": rank_file(rank), "traceEvents": events,
                           "baseTimeNanoseconds": reference + round(origin * 1000)}
    return documents


def _network(fabric: Fabric | None) -> NetworkTopology:
    if fabric is None:
        return NetworkTopology(topology="loopback (all shards on one host)", bandwidth_gbps=[None, None])
    kinds = Counter(rail.kind for rail in fabric.rails)
    scale_out = max((rail.bandwidth_gbps for rail in fabric.rails), default=None)
    scale_up = max((link.bandwidth_gbps for link in fabric.links if link.kind == "scale-up"), default=None)
    rails = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "none"
    return NetworkTopology(topology=f"rail-optimized: {len(fabric.hosts)} hosts, rails: {rails}",
                           bandwidth_gbps=[scale_out, scale_up])


def _notes(record: TierRecord, job: JobSpec | None, fabric: Fabric | None) -> dict[str, Any]:
    algorithms = Counter(step["algorithm"] for step in record.steps)
    gloo = record.backend == "gloo"
    return {
        "what_ran": record.what_ran,
        "job_name": job.name if job is not None else None,
        "events": "recorded by torch.profiler in each shard (CPU activities" + ("" if gloo else ", CUDA")
                  + "); ts moved onto one clock per run",
        "cpu_kernels": (f"gloo run: the gloo:* collective events (communication) and the {', '.join(COMPUTE_RANGES)} "
                        "ranges (compute) are recategorised 'kernel', args.recorded_cat keeping the profiler's "
                        f"category; {COHORT_WAIT_RANGE} (an injected late cohort) stays an annotation")
        if gloo else "none: the GPU kernels are as recorded",
        "algorithms": dict(algorithms),
        "steps": record.steps,
        "straggler_shard": record.straggler,
        "injected_delay_s": record.delay_s,
        "selector_link": {"alpha_s": record.link.alpha_s, "beta_s_per_byte": record.link.beta_s_per_byte,
                          "ocs": record.link.ocs},
        "weight_unit": UNIT,
        "partial_sum_bytes": record.bytes,
        "fabric": "given: network_topo describes it; the run itself used the transport below" if fabric
                  else "none given",
        "transport": "TCP over loopback" if gloo else "NCCL",
        "server_rank": None,
    }


def _card(record: TierRecord, job: JobSpec | None, fabric: Fabric | None, contributor: str, contact: str) -> Card:
    model = job.task.model if job is not None else "synthetic-update"
    floats = [dtype for dtype in record.dtypes if dtype.kind == "f"]
    precision = {8: "fp64", 4: "fp32", 2: "fp16"}.get(max((d.itemsize for d in floats), default=8), "fp32")
    gpu = record.backend == "nccl"
    return Card(
        description=f"Sharded aggregation tier: {record.shards} aggregator shards fold their cohorts and AllReduce "
                    f"the partial sums ({', '.join(sorted({s['algorithm'] for s in record.steps}))}), "
                    f"{len(record.steps)} profiled steps; real torch.profiler traces, one rank per shard.",
        hf_url=None,
        trace_url=None,
        contributor=contributor,
        contact=contact,
        workload=Workload(
            model=ModelSection(phase="training", moe=False, granularity=GRANULARITY, model_family=model,
                               precision=precision, epochs=None, iteration=len(record.steps),
                               model_arch={"num_params": record.num_params}),
            data=DataSection(batch_size=round(record.total_weight), seq_len=None,
                             dataset=str(job.task.options.get("dataset", "client updates")) if job
                             else "synthetic client updates"),
            hardware=Hardware(network_topo=_network(fabric),
                              xpu_spec=XpuSpec(type="gpu" if gpu else "cpu", model="cuda" if gpu else "host-cpu",
                                               total_count=record.shards, count_per_node=record.shards),
                              driver_version=None),
        ),
        model_executor=ModelExecutor(
            framework=Framework(name="propius", compiler_tool_selection=None, version=_version("propius"),
                                torch_version=_version("torch")),
            model_plan_parallelization=Parallelization(dp_replicate=record.shards, dp_shard=1, tp=1, pp=1, cp=1,
                                                       ep=1, pp_mb=1),
            communication_library=CommunicationLibrary(name="NCCL" if gpu else "Gloo", version=_version("torch"),
                                                       env=None if gpu else {"GLOO_SOCKET_IFNAME": "lo"}),
            protocol_selection=["nvlink" if gpu else "tcp"],
        ),
        metric_source=MetricSource(traces=["json"], metrics_specific_trace=[]),
        collection_notes=_notes(record, job, fabric),
    )


def _write(record: TierRecord, out_dir: Path, launch_command: str, job: JobSpec | None, fabric: Fabric | None,
           contributor: str, contact: str) -> Path:
    model = job.task.model if job is not None else "synthetic-update"
    job_name = f"{job.name if job is not None else 'aggregate'}-tier{record.shards}"
    name = data_point_name(model=model, demand=record.shards, job=job_name,
                           platform="gpu" if record.backend == "nccl" else "cpu", group=contributor)
    body = launch_command if launch_command.endswith("\n") else launch_command + "\n"
    script = body if body.startswith("#!") else "#!/usr/bin/env bash\nset -euo pipefail\n" + body
    return write_data_point(Path(out_dir), name, _card(record, job, fabric, contributor, contact),
                            rank_documents(record), script)


def export_tier_run(run: TierRun, out_dir: Path, *, launch_command: str, job: JobSpec | None = None,
                    fabric: Fabric | None = None, contributor: str = "propius", contact: str = "") -> Path:
    """Write ``run`` as the data point ``out_dir/<name>``; ``launch_command`` is ``run.sh``'s body (the command
    that reproduces the run). Built beside its destination and renamed into place, replacing only an earlier
    data point of the same name."""
    return _write(TierRecord.of_run(run), out_dir, launch_command, job, fabric, contributor, contact)


def export_pool_trace(trace: PoolTrace, out_dir: Path, *, job: JobSpec, launch_command: str,
                      fabric: Fabric | None = None, contributor: str = "propius", contact: str = "") -> Path:
    """Write what a completed job's live shards recorded as the data point ``<job name>-tier<N>`` under
    ``out_dir``, beside the job's own; ``launch_command`` is ``run.sh``'s body (the job's submission)."""
    return _write(TierRecord.of_pool(trace), out_dir, launch_command, job, fabric, contributor, contact)
