"""A job's recorded spans as one Kineto-style Chrome trace per rank: the mapping of FL rounds onto ranks.

Rank 0 is the aggregator and ranks 1..K the cohort slots, K the most slots any profiled round filled.
Every rank gets a ``ProfilerStep#<round>`` for every round, so all ranks have the same steps, as the
toolkit expects: a slot left empty in a round (fewer results than K) gets its step alone, with
``args.slot_filled: false``. Times are microseconds since the job's first recorded span, on the
control plane's clock for every rank (client times were moved onto it when recorded);
``baseTimeNanoseconds`` holds that origin, so ``unix_ns = baseTimeNanoseconds + 1000 * ts``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from control_plane.store import TraceEventRecord
from propius.trace.format import STEP_CATEGORY, is_communication, step_number

__all__ = ["LANES", "NoTraceError", "RankTraces", "build_rank_traces"]

LANES = {0: "steps", 1: "compute", 2: "communication"}
"""``tid`` of each kind of event: lanes keep overlapping compute and transfers from breaking nesting."""


class NoTraceError(ValueError):
    """The job has no recorded round: there is nothing to export."""


@dataclass(frozen=True)
class RankTraces:
    origin_us: int
    rounds: list[int]
    documents: dict[int, dict[str, Any]]
    """rank -> the Chrome trace object written as ``rank<N>_trace.json``."""
    slot_clients: dict[tuple[int, int], str]
    """(round, rank) -> the client that filled the slot."""
    filled_slots: dict[int, int]
    """round -> cohort slots that round filled (its accepted updates, up to trace_max_ranks)."""


def _lane(record: TraceEventRecord) -> int:
    if step_number(record.name) is not None and record.cat == STEP_CATEGORY:
        return 0
    return 2 if is_communication(record.name) else 1


def _event(rank: int, tid: int, name: str, cat: str, ts: int, dur: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _metadata(rank: int) -> list[dict[str, Any]]:
    label = "aggregator (rank 0)" if rank == 0 else f"cohort slot {rank}"
    events = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": label}},
              {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}}]
    events += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": lane}}
               for tid, lane in LANES.items()]
    return events


def build_rank_traces(records: Sequence[TraceEventRecord]) -> RankTraces:
    """Raises NoTraceError when no round of the job was recorded."""
    steps = {(r.round, r.rank): r for r in records if r.cat == STEP_CATEGORY and step_number(r.name) is not None}
    rounds = sorted({round_ for round_, _ in steps})
    if not rounds:
        raise NoTraceError("the job has no recorded round (was it run with trace_max_rounds = 0, or never started?)")
    world = max(rank for _, rank in steps) + 1
    origin = min(r.ts_us for r in records)
    reference = {round_: steps.get((round_, 0)) or next(s for (n, _), s in steps.items() if n == round_)
                 for round_ in rounds}

    clients: dict[tuple[int, int], str] = {}
    work: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if (record.round, record.rank) in steps and steps[(record.round, record.rank)] is record:
            continue
        if record.round not in reference:
            continue
        args = {**json.loads(record.args_json or "{}"), "round": record.round}
        if record.rank > 0 and isinstance(args.get("client_id"), str):
            clients[(record.round, record.rank)] = args["client_id"]
        work[record.rank].append(_event(record.rank, _lane(record), record.name, record.cat,
                                        record.ts_us - origin, record.dur_us, args))

    documents = {}
    for rank in range(world):
        events = list(work[rank])
        for round_ in rounds:
            own = steps.get((round_, rank))
            span = own or reference[round_]
            args = {**json.loads(span.args_json or "{}"), "round": round_}
            if rank > 0:
                args["slot_filled"] = own is not None
            if (round_, rank) in clients:
                args["client_id"] = clients[(round_, rank)]
            events.append(_event(rank, 0, span.name, STEP_CATEGORY, span.ts_us - origin, span.dur_us, args))
        events.sort(key=lambda event: (event["ts"], -event["dur"], event["tid"]))
        documents[rank] = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "grpc", "rank": rank, "world_size": world},
            "baseTimeNanoseconds": origin * 1000,
            "displayTimeUnit": "ms",
            "traceEvents": _metadata(rank) + events,
        }
    filled = {round_: sum(1 for (n, rank) in steps if n == round_ and rank > 0) for round_ in rounds}
    return RankTraces(origin, rounds, documents, clients, filled)
