"""Fill a workload card from what Propius knows about a finished job: its spec, rounds, bindings, trace.

Every value is either taken from the record or derived in a way the card's ``collection_notes`` say;
what a FL job cannot honestly state in GPU terms (link bandwidth, a scale-up domain) is left null.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from clients.executors.architecture import weight_shapes
from control_plane.store import BindingRecord, JobRecord, RoundRecord, TraceEventRecord
from propius.specs import JobSpec, TaskConfig
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
from propius.trace.chrome import RankTraces

__all__ = ["GRANULARITY", "JobFacts", "build_card"]

GRANULARITY = "fl_round"
"""What one step is: a whole FL round (fan-out, every client's local steps, uploads, aggregation), coarser than
the template's ``model_fwd_bwd_pass``."""
_COMPILER = {"torch-train": "plain_pytorch"}
"""``compiler_tool_selection`` per executor: torch-train runs eager PyTorch, nothing compiled; another executor
(a Flower app's own code) is not known, so null."""


@dataclass(frozen=True)
class JobFacts:
    """Everything the card is made from, as read from the store."""

    job: JobRecord
    spec: JobSpec
    rounds: Sequence[RoundRecord]
    bindings: Sequence[BindingRecord]
    records: Sequence[TraceEventRecord]
    traces: RankTraces


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _model_arch(task: TaskConfig) -> dict[str, Any] | None:
    """Parameter and layer count of the job's model, from its weight shapes (no torch in the control plane's
    process, which exports); None for a model or options the executors do not know."""
    try:
        shapes = weight_shapes(task)
    except ValueError:
        return None
    return {"num_params": sum(math.prod(shape) for shape in shapes.values()),
            "num_layers": sum(1 for shape in shapes.values() if len(shape) == 2)}


def _samples_per_round(facts: JobFacts) -> int:
    """Samples processed in a round, all clients together: each accepted client runs ``local_steps``
    minibatches of ``min(batch_size, its dataset size)``; mean over the profiled rounds."""
    task = facts.spec.task
    closing = {r.round: r.attempt for r in facts.rounds if r.state == "closed"}
    totals = []
    for round_ in facts.traces.rounds:
        accepted = [b for b in facts.bindings
                    if b.round == round_ and b.attempt == closing.get(round_) and b.outcome == "completed"]
        if accepted:
            sizes = [b.num_samples if b.num_samples else task.batch_size for b in accepted]
            totals.append(sum(task.local_steps * min(task.batch_size, int(size)) for size in sizes))
        else:
            totals.append(facts.traces.filled_slots.get(round_, 0) * task.local_steps * task.batch_size)
    return round(statistics.fmean(totals))


def _serving_clients(facts: JobFacts) -> set[str]:
    profiled = set(facts.traces.rounds)
    served = {b.client_id for b in facts.bindings if b.round in profiled and b.outcome == "completed"}
    return served | set(facts.traces.slot_clients.values())


def _transfer_gbps(records: Sequence[TraceEventRecord]) -> dict[str, Any]:
    """Effective throughput of the recorded transfers (bytes over measured duration). With small models
    this is latency, not link capacity, so it is a note here and never the card's ``bandwidth_gbps``."""
    rates = []
    for record in records:
        args = json.loads(record.args_json or "{}")
        if "transport" in args and isinstance(args.get("bytes"), int) and record.dur_us > 0:
            rates.append(args["bytes"] * 8 / (record.dur_us * 1e-6) / 1e9)
    if not rates:
        return {"transfers": 0}
    return {"transfers": len(rates), "median": round(statistics.median(rates), 6), "max": round(max(rates), 6)}


def _notes(facts: JobFacts, policy: str, transport: str, from_fabric: bool) -> dict[str, Any]:
    spec, task = facts.spec, facts.spec.task
    filled = [facts.traces.filled_slots[r] for r in facts.traces.rounds]
    outcomes = [b.outcome for b in facts.bindings]
    return {
        "job_id": facts.job.job_id,
        "job_name": spec.name,
        "owner": spec.owner,
        "algorithm": "FedAvg: sample-weighted average of client updates, folded by the aggregator as they arrive",
        "server_rank": 0,
        "slot_ranks": "1..K: rank i is the i-th accepted update of the round; its events belong to whichever "
                      "client filled the slot that round (args.client_id); an unfilled slot has only its "
                      "ProfilerStep (args.slot_filled: false)",
        "clients_per_round": {
            "demand": spec.demand, "min_results": spec.results_to_close, "bind_target": spec.bind_target(spec.demand),
            "accepted_mean": round(statistics.fmean(filled), 3), "accepted_min": min(filled),
            "accepted_max": max(filled),
        },
        "epochs": "1 by the toolkit's convention (one profiled run); each client trains local_steps minibatches "
                  "per round",
        "local_steps": task.local_steps,
        "client_batch_size": task.batch_size,
        "learning_rate": task.learning_rate,
        "executor": task.executor,
        "policy": policy,
        "selection": f"over-selection {spec.over_selection:g}: up to {spec.bind_target(spec.demand)} clients bound "
                     f"per round; the round closes at {spec.results_to_close} accepted updates (or its deadline); "
                     "the other bound clients are released",
        "dropouts": outcomes.count("dropped"),
        "released": outcomes.count("released"),
        "failed_round_attempts": sum(1 for r in facts.rounds if r.state == "failed"),
        "transport": transport,
        "rounds_planned": spec.rounds,
        "rounds_done": facts.job.rounds_done,
        "rounds_profiled": len(facts.traces.rounds),
        "clock": "one clock for all ranks, the control plane's: unix_us = time_origin_unix_us + ts; client phase "
                 "times were moved onto it with each device's NTP-style offset from its Accept round trip",
        "time_origin_unix_us": facts.traces.origin_us,
        "synthetic_kernels": "events are cat 'kernel' so the toolkit reads them, but no GPU kernel ran "
                             "(args.synthetic_kernel: true); durations are measured wall-clock times",
        "batch_size_derivation": "workload.data.batch_size = sum over accepted clients of local_steps x "
                                 "min(batch_size, client dataset size), mean over profiled rounds",
        "effective_transfer_gbps": _transfer_gbps(facts.records),
        **({"hardware_source": "the fabric the job's accelerators were placed on (propius.trace.hardware): "
                               "bandwidths are the fabric's link rates per accelerator, not measured"}
           if from_fabric else
           {"bandwidth_gbps_null_because": "clients reach the aggregator over their own, unmeasured links"}),
    }


def build_card(facts: JobFacts, *, contributor: str, contact: str, policy: str, transport: str,
               hardware: Hardware | None = None) -> Card:
    """The card; ``hardware``: a cloud job's section from its fabric (:func:`propius.trace.hardware.
    hardware_from_fabric`), else the edge job's (a star of client devices, link bandwidths unknown)."""
    spec, task = facts.spec, facts.spec.task
    profiled = len(facts.traces.rounds)
    slots = max(facts.traces.documents) if facts.traces.documents else 0
    dataset = task.options.get("dataset", f"synthetic-gaussian-blobs-seed{task.options.get('data_seed', 0)}")
    return Card(
        description=f"Federated training of the {task.model} model ({spec.name}) on Propius: {profiled} profiled "
                    f"FedAvg rounds of up to {slots} clients each; rank 0 is the aggregator, ranks 1..{slots} "
                    f"the cohort slots of each round.",
        hf_url=None,
        trace_url=None,
        contributor=contributor,
        contact=contact,
        workload=Workload(
            model=ModelSection(phase="training", moe=False, granularity=GRANULARITY, model_family=task.model,
                               precision=str(task.options.get("precision", "fp32")), epochs=1,
                               iteration=profiled, model_arch=_model_arch(task)),
            data=DataSection(batch_size=_samples_per_round(facts), seq_len=None, dataset=str(dataset)),
            hardware=hardware or Hardware(
                network_topo=NetworkTopology(topology="star", bandwidth_gbps=[None, None]),
                xpu_spec=XpuSpec(type="cpu", model="client-device", total_count=len(_serving_clients(facts)),
                                 count_per_node=1),
                driver_version=None,
            ),
        ),
        model_executor=ModelExecutor(
            framework=Framework(name="propius", compiler_tool_selection=_COMPILER.get(task.executor),
                                version=_version("propius"), executor=task.executor, torch_version=_version("torch")),
            model_plan_parallelization=Parallelization(dp_replicate=spec.demand, dp_shard=1, tp=1, pp=1, cp=1, ep=1,
                                                       pp_mb=1),
            communication_library=CommunicationLibrary(name="grpc", version=_version("grpcio"), env=None),
            protocol_selection=["tcp"],
        ),
        metric_source=MetricSource(traces=["json"], metrics_specific_trace=[]),
        collection_notes=_notes(facts, policy, transport, from_fabric=hardware is not None),
    )
