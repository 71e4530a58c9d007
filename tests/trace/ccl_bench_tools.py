"""CCL-Bench's own tools, re-derived from their published definitions to check ours against, from the files alone."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

__all__ = ["ccl_bench_communication_fraction"]

_COMM = re.compile(r"nccl|allreduce|allgather|reducescatter|broadcast|cross[_\-]?device|all_reduce|all_gather|"
                   r"reduce_scatter|sendrecv|send|recv|p2p|communicate", re.IGNORECASE)
_STEP = re.compile(r"ProfilerStep#(\d+)$")


def ccl_bench_communication_fraction(folder: Path) -> float | None:
    """CCL-Bench's ``communication_fraction`` on a ``json`` data point (tools/communication_fraction), from the
    files alone: per rank file, the ``user_annotation`` ProfilerSteps sorted by number, the first and last
    dropped when there are more than two; per such step, the summed ``dur`` of the ``kernel`` events that
    overlap it (whole, not clipped) whose name is communication, over that of all of them; the mean over the
    rank's steps with kernels, then over ranks; None where the tool prints -1."""
    per_rank = []
    for path in sorted(folder.glob("*.json")):
        events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e for e in events if e.get("cat") == "user_annotation" and _STEP.match(e["name"])),
                       key=lambda e: int(_STEP.match(e["name"]).group(1)))
        kernels = [(e["ts"], e["dur"], bool(_COMM.search(e["name"]))) for e in events if e.get("cat") == "kernel"]
        if not kernels:
            continue
        inner = steps[1:-1] if len(steps) > 2 else steps
        fractions = []
        for step in inner:
            start, end = step["ts"], step["ts"] + step["dur"]
            inside = [(dur, comm) for ts, dur, comm in kernels if ts + dur > start and ts < end]
            total = sum(dur for dur, _ in inside)
            if total > 0:
                fractions.append(sum(dur for dur, comm in inside if comm) / total)
        if fractions:
            per_rank.append(statistics.mean(fractions))
    return statistics.mean(per_rank) if per_rank else None
