"""Metrics of a data point (definitions: docs/ccl-bench.md): three under CCL-Bench's names, two of our own.

``avg_step_time_s``, ``communication_fraction`` and ``compute_comm_overlap`` compute what the toolkit's tools
of those names (``tools/avg_step_time``, ``tools/communication_fraction``, ``tools/compute_comm_overlap`` in
the ccl-bench repository) compute on a ``json`` data point, so a number under a CCL-Bench name is the number
the toolkit reports (as a fraction where the toolkit prints a percentage). That includes the toolkit's quirks:
each rank drops its own first and last step, at most 16 rank files are read (the same seeded sample), and
each tool has its own list of communication names.

``worker_finish_lag_s`` and ``worker_compute_imbalance`` are Propius' own: they look at the workers only
(every rank but the card's ``collection_notes.server_rank``, the FL aggregator) on covered time (a union of
spans clipped to the step), which is what a FL round's slots need and no toolkit tool measures.
"""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import asdict, dataclass

from propius.trace.datapoint import DataPoint, RankTrace, Span, Step
from propius.trace.format import rank_file
from propius.trace.intervals import Interval, clip, covered, intersection

__all__ = [
    "FRACTION_COMM",
    "OVERLAP_COMM",
    "TOOLKIT_MAX_RANK_FILES",
    "TraceMetrics",
    "compute_metrics",
    "measured_steps",
    "toolkit_ranks",
]

_US = 1e-6
TOOLKIT_MAX_RANK_FILES = 16
"""The toolkit reads at most this many ``*.json`` files of a data point: a sample seeded with 42."""
_TOOLKIT_SAMPLE_SEED = 42

FRACTION_COMM = re.compile(
    "|".join(("nccl", "allreduce", "allgather", "reducescatter", "broadcast", r"cross[_\-]?device", "all_reduce",
              "all_gather", "reduce_scatter", "sendrecv", "send", "recv", "p2p", "communicate")),
    re.IGNORECASE)
"""What ``communication_fraction`` counts as communication (a name search; ``alltoall`` is not in it)."""
OVERLAP_COMM = re.compile(
    "|".join(("nccl", r"all[_\-]?reduce", r"all[_\-]?gather", r"reduce[_\-]?scatter", r"all[_\-]?to[_\-]?all",
              "broadcast", r"cross[_\-]?device", "sendrecv", "collective")),
    re.IGNORECASE)
"""What ``compute_comm_overlap`` counts as communication (a name search; plain ``send``/``recv`` are not)."""


@dataclass(frozen=True)
class TraceMetrics:
    ranks: int
    steps: int
    steps_measured: int
    avg_step_time_s: float | None
    """CCL-Bench ``avg_step_time``: per rank, the mean duration of its steps but its first and last; averaged
    over ranks."""
    communication_fraction: float | None
    """CCL-Bench ``communication_fraction`` / 100: per rank and measured step, the summed durations of the
    communication kernels overlapping the step over those of all kernels overlapping it; averaged over the
    rank's steps with kernels, then over ranks."""
    compute_comm_overlap: float | None
    """CCL-Bench ``compute_comm_overlap`` / 100: per rank, communication time (clipped to the measured steps)
    also covered by compute, over communication time; averaged over ranks that communicate."""
    worker_finish_lag_s: float | None
    """Ours: per step, the last worker's finish minus the median worker finish; averaged over steps."""
    worker_compute_imbalance: float | None
    """Ours: per step, max / mean of the workers' busy compute time, minus 1; averaged over steps."""

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


# ------------------------------------------------------------------ the toolkit's definitions


def toolkit_ranks(point: DataPoint) -> list[RankTrace]:
    """The ranks the toolkit reads: all of them, or, beyond 16 files, its seeded sample of the file names
    sorted as strings (``rank10_trace.json`` before ``rank1_trace.json``)."""
    names = sorted(rank_file(rank) for rank in point.ranks)
    if len(names) > TOOLKIT_MAX_RANK_FILES:
        names = sorted(random.Random(_TOOLKIT_SAMPLE_SEED).sample(names, TOOLKIT_MAX_RANK_FILES))
    by_name = {rank_file(rank): trace for rank, trace in point.ranks.items()}
    return [by_name[name] for name in names]


def _inner_steps(trace: RankTrace) -> list[Step]:
    """The rank's step events by step number, without its first and last when it has more than two."""
    ordered = sorted(trace.step_events, key=lambda step: step.number)
    return ordered[1:-1] if len(ordered) > 2 else ordered


def _avg_step_time_us(point: DataPoint) -> float | None:
    per_rank = [statistics.fmean(step.end - step.start for step in inner)
                for trace in toolkit_ranks(point) if (inner := _inner_steps(trace))]
    return _mean(per_rank)


def _overlapping(span: Span, step: Step) -> bool:
    return span.end > step.start and span.start < step.end


def _communication_fraction(point: DataPoint) -> float | None:
    per_rank = []
    for trace in toolkit_ranks(point):
        if not trace.work:
            continue
        if not trace.step_events:  # no steps: every kernel of the rank at once
            inside = [trace.work]
        else:
            inside = [[span for span in trace.work if _overlapping(span, step)] for step in _inner_steps(trace)]
        fractions = []
        for spans in inside:
            total = sum(span.end - span.start for span in spans)
            if total > 0:
                fractions.append(sum(span.end - span.start for span in spans if FRACTION_COMM.search(span.name))
                                 / total)
        if fractions:
            per_rank.append(statistics.fmean(fractions))
    return _mean(per_rank)


def _clipped(trace: RankTrace, step: Step, communication: bool) -> list[Interval]:
    spans = (clip((span.start, span.end), (step.start, step.end)) for span in trace.work
             if bool(OVERLAP_COMM.search(span.name)) == communication)
    return [span for span in spans if span is not None and span[1] > span[0]]


def _overlap(point: DataPoint) -> float | None:
    ratios = []
    for trace in toolkit_ranks(point):
        if not trace.step_events or not trace.work:
            continue
        comm = both = 0.0
        for step in _inner_steps(trace):
            communication = _clipped(trace, step, True)
            comm += covered(communication)
            both += intersection(communication, _clipped(trace, step, False))
        if comm > 0:
            ratios.append(both / comm)
    return _mean(ratios)


# ------------------------------------------------------------------ ours


def measured_steps(point: DataPoint) -> list[int]:
    """The step numbers our own metrics measure: all ranks' steps but the first and the last."""
    numbers = sorted({n for trace in point.ranks.values() for n in trace.steps})
    return numbers[1:-1] if len(numbers) >= 3 else numbers


def _in_step(trace: RankTrace, number: int, communication: bool | None = None) -> list[Interval]:
    """The rank's work spans clipped to its step ``number`` (all, or only comm / only compute)."""
    step = trace.steps.get(number)
    if step is None:
        return []
    spans = (clip((s.start, s.end), (step.start, step.end)) for s in trace.work
             if communication is None or s.communication == communication)
    return [span for span in spans if span is not None]


def _workers(point: DataPoint) -> list[RankTrace]:
    return [trace for rank, trace in point.ranks.items() if rank != point.server_rank]


def _finish_lag_us(point: DataPoint, steps: list[int]) -> float | None:
    lags = []
    for n in steps:
        ends = [max(end for _, end in spans) for trace in _workers(point) if (spans := _in_step(trace, n))]
        if len(ends) >= 2:
            lags.append(max(ends) - statistics.median(ends))
    return _mean(lags)


def _compute_imbalance(point: DataPoint, steps: list[int]) -> float | None:
    imbalances = []
    for n in steps:
        busy = [covered(_in_step(trace, n, False)) for trace in _workers(point) if _in_step(trace, n)]
        if busy and statistics.fmean(busy) > 0:
            imbalances.append(max(busy) / statistics.fmean(busy) - 1)
    return _mean(imbalances)


def compute_metrics(point: DataPoint) -> TraceMetrics:
    steps = measured_steps(point)
    step_time = _avg_step_time_us(point)
    lag = _finish_lag_us(point, steps)
    return TraceMetrics(
        ranks=len(point.ranks),
        steps=len({n for trace in point.ranks.values() for n in trace.steps}),
        steps_measured=len(steps),
        avg_step_time_s=None if step_time is None else step_time * _US,
        communication_fraction=_communication_fraction(point),
        compute_comm_overlap=_overlap(point),
        worker_finish_lag_s=None if lag is None else lag * _US,
        worker_compute_imbalance=_compute_imbalance(point, steps),
    )
