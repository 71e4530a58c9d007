"""A sharded aggregation run (:func:`data_plane.collectives.tier.run_tier`) as a CCL-Bench data point.

Unlike a FL job's data point (:mod:`propius.trace.export`, spans the control plane measured, written as
synthetic kernels), every event here is one torch.profiler recorded in a shard process: the steps
(``ProfilerStep#<n>``), the ops, the gloo collectives. Two things are changed, both mechanical:

- **one clock**: each rank's ``ts`` is moved onto a common origin (the earliest event of the run) with its
  own ``baseTimeNanoseconds`` (Kineto's ``unix_ns = baseTimeNanoseconds + 1000·ts``), so the ranks' steps
  line up; durations are untouched, and ``baseTimeNanoseconds`` names the new origin;
- **the CPU's kernels** (gloo runs only): CCL-Bench's tools read ``cat: kernel`` events only, and a CPU run
  records none. The events that are the shard's device work are recategorised ``kernel`` (with
  ``args.recorded_cat`` keeping what the profiler wrote): gloo's execution of each collective or transfer
  (``gloo:all_reduce``, ``gloo:send``, ``gloo:recv``, ``gloo:all_gather``, the analogue of a NCCL kernel)
  as communication, and the fold range (:data:`FOLD_RANGE`) as compute. An NCCL run keeps its GPU kernels as
  recorded and changes no category.

Events without ``args`` get an empty one (the format requires the key). Nothing is added or dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

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

__all__ = ["GRANULARITY", "export_tier_run", "rank_documents"]

GRANULARITY = "sharded_aggregation_step"
"""What one step is: every shard folds its cohort, then the shards AllReduce their partial sums."""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _is_cpu_kernel(event: dict[str, Any]) -> bool:
    name = str(event.get("name", ""))
    if event.get("cat") != STEP_CATEGORY:
        return False
    return name == FOLD_RANGE or (name.startswith("gloo:") and is_communication(name))


def rank_documents(run: TierRun) -> dict[int, dict[str, Any]]:
    """Each rank's recorded trace, on one clock, with a CPU run's device work as kernels (module doc)."""
    recorded = {rank: json.loads(path.read_text()) for rank, path in sorted(run.traces.items())}
    reference = min(document["baseTimeNanoseconds"] for document in recorded.values())
    shift_us = {rank: (document["baseTimeNanoseconds"] - reference) / 1000 for rank, document in recorded.items()}
    origin = min(event["ts"] + shift_us[rank] for rank, document in recorded.items()
                 for event in document["traceEvents"] if event.get("ph") != "M" and "ts" in event)
    documents = {}
    for rank, document in recorded.items():
        events = []
        for event in document["traceEvents"]:
            event = dict(event)
            if event.get("ph") != "M" and "ts" in event:
                event["ts"] = round(event["ts"] + shift_us[rank] - origin, 3)
            if event.get("ph") == "X":
                event.setdefault("args", {})
                if run.backend == "gloo" and _is_cpu_kernel(event):
                    event["args"] = {**event["args"], "recorded_cat": event["cat"]}
                    event["cat"] = WORK_CATEGORY
            events.append(event)
        documents[rank] = {**document, "traceName": rank_file(rank), "traceEvents": events,
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


def _notes(run: TierRun, job: JobSpec | None, fabric: Fabric | None) -> dict[str, Any]:
    algorithms = Counter(step.algorithm for step in run.steps)
    return {
        "what_ran": f"{run.shards} aggregator shards, real processes over torch.distributed ({run.backend}); each "
                    "step every shard folds its cohort (sample-weighted, float64) and the shards AllReduce their "
                    "partial sums and weights",
        "job_name": job.name if job is not None else None,
        "events": "recorded by torch.profiler in each shard (CPU activities"
                  + (", CUDA" if run.backend == "nccl" else "") + "); ts moved onto one clock per run",
        "cpu_kernels": (f"gloo run: the gloo:* collective events (communication) and the {FOLD_RANGE} range "
                        "(compute) are recategorised 'kernel', args.recorded_cat keeping the profiler's "
                        f"category; {COHORT_WAIT_RANGE} (an injected late cohort) stays an annotation")
        if run.backend == "gloo" else "none: the GPU kernels are as recorded",
        "algorithms": dict(algorithms),
        "steps": [{"step": s.step, "mode": s.mode, "algorithm": s.algorithm, "selected": s.selected,
                   "order": s.order, "last_arrival": s.last_arrival, "after_arrival_s": round(s.after_arrival_s, 6)}
                  for s in run.steps],
        "straggler_shard": run.straggler,
        "injected_delay_s": run.delay_s,
        "selector_link": {"alpha_s": run.link.alpha_s, "beta_s_per_byte": run.link.beta_s_per_byte,
                          "ocs": run.link.ocs},
        "weight_unit": UNIT,
        "partial_sum_bytes": run.bytes,
        "fabric": "given: network_topo describes it; the run itself used the transport below" if fabric
                  else "none given",
        "transport": "TCP over loopback" if run.backend == "gloo" else "NCCL",
        "server_rank": None,
    }


def _card(run: TierRun, job: JobSpec | None, fabric: Fabric | None, contributor: str, contact: str) -> Card:
    model = job.task.model if job is not None else "synthetic-update"
    floats = [a.dtype for a in run.aggregate.tensors.values() if a.dtype.kind == "f"]
    precision = {8: "fp64", 4: "fp32", 2: "fp16"}.get(max((d.itemsize for d in floats), default=8), "fp32")
    gpu = run.backend == "nccl"
    return Card(
        description=f"Sharded aggregation tier: {run.shards} aggregator shards fold their cohorts and AllReduce "
                    f"the partial sums ({', '.join(sorted({s.algorithm for s in run.steps}))}), "
                    f"{len(run.steps)} profiled steps; real torch.profiler traces, one rank per shard.",
        hf_url=None,
        trace_url=None,
        contributor=contributor,
        contact=contact,
        workload=Workload(
            model=ModelSection(phase="training", moe=False, granularity=GRANULARITY, model_family=model,
                               precision=precision, epochs=None, iteration=len(run.steps),
                               model_arch={"num_params": sum(a.size for a in run.aggregate.tensors.values())}),
            data=DataSection(batch_size=round(run.aggregate.total_weight), seq_len=None,
                             dataset=str(job.task.options.get("dataset", "client updates")) if job
                             else "synthetic client updates"),
            hardware=Hardware(network_topo=_network(fabric),
                              xpu_spec=XpuSpec(type="gpu" if gpu else "cpu", model="cuda" if gpu else "host-cpu",
                                               total_count=run.shards, count_per_node=run.shards),
                              driver_version=None),
        ),
        model_executor=ModelExecutor(
            framework=Framework(name="propius", compiler_tool_selection=None, version=_version("propius"),
                                torch_version=_version("torch")),
            model_plan_parallelization=Parallelization(dp_replicate=run.shards, dp_shard=1, tp=1, pp=1, cp=1, ep=1,
                                                       pp_mb=1),
            communication_library=CommunicationLibrary(name="NCCL" if gpu else "Gloo", version=_version("torch"),
                                                       env=None if gpu else {"GLOO_SOCKET_IFNAME": "lo"}),
            protocol_selection=["nvlink" if gpu else "tcp"],
        ),
        metric_source=MetricSource(traces=["json"], metrics_specific_trace=[]),
        collection_notes=_notes(run, job, fabric),
    )


def export_tier_run(run: TierRun, out_dir: Path, *, launch_command: str, job: JobSpec | None = None,
                    fabric: Fabric | None = None, contributor: str = "propius", contact: str = "") -> Path:
    """Write ``run`` as the data point ``out_dir/<name>``; ``launch_command`` is ``run.sh``'s body (the command
    that reproduces the run). Built beside its destination and renamed into place, replacing only an earlier
    data point of the same name."""
    model = job.task.model if job is not None else "synthetic-update"
    job_name = f"{job.name if job is not None else 'aggregate'}-tier{run.shards}"
    name = data_point_name(model=model, demand=run.shards, job=job_name,
                           platform="gpu" if run.backend == "nccl" else "cpu", group=contributor)
    body = launch_command if launch_command.endswith("\n") else launch_command + "\n"
    script = body if body.startswith("#!") else "#!/usr/bin/env bash\nset -euo pipefail\n" + body
    return write_data_point(Path(out_dir), name, _card(run, job, fabric, contributor, contact),
                            rank_documents(run), script)
