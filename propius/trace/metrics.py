"""The core CCL-Bench metrics, computed by Propius itself on any data point (definitions: docs/ccl-bench.md).

Like the toolkit, every metric looks only at the measured steps: the first and the last step are dropped
when there are at least three (warm-up and tear-down), and each work span counts only for the part of it
inside its rank's step. Time is covered time (a union of spans), so overlapping spans count once.
Workers are all ranks but the server rank the card's ``collection_notes.server_rank`` names (the FL
aggregator), or all ranks when it names none.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from propius.trace.datapoint import DataPoint, RankTrace
from propius.trace.intervals import Interval, clip, covered, intersection

__all__ = ["TraceMetrics", "compute_metrics", "measured_steps"]

_US = 1e-6


@dataclass(frozen=True)
class TraceMetrics:
    ranks: int
    steps: int
    steps_measured: int
    avg_step_time_s: float | None
    """Mean step duration per rank, averaged over ranks."""
    communication_fraction: float | None
    """Per rank: time covered by communication / time covered by any work; averaged over ranks with work."""
    compute_comm_overlap: float | None
    """Per rank: communication time also covered by compute / communication time; averaged over ranks
    that communicate."""
    straggler_delay_s: float | None
    """Per step: the last worker's finish minus the median worker finish; averaged over steps."""
    load_imbalance: float | None
    """Per step: max / mean of the workers' busy compute time, minus 1; averaged over steps."""

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def measured_steps(point: DataPoint) -> list[int]:
    numbers = sorted({n for trace in point.ranks.values() for n in trace.steps})
    return numbers[1:-1] if len(numbers) >= 3 else numbers


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _in_step(trace: RankTrace, number: int, communication: bool | None = None) -> list[Interval]:
    """The rank's work spans clipped to its step ``number`` (all, or only comm / only compute)."""
    step = trace.steps.get(number)
    if step is None:
        return []
    spans = (clip((s.start, s.end), (step.start, step.end)) for s in trace.work
             if communication is None or s.communication == communication)
    return [span for span in spans if span is not None]


def _communication_fraction(point: DataPoint, steps: list[int]) -> float | None:
    fractions = []
    for trace in point.ranks.values():
        busy = sum(covered(_in_step(trace, n)) for n in steps)
        if busy > 0:
            fractions.append(sum(covered(_in_step(trace, n, True)) for n in steps) / busy)
    return _mean(fractions)


def _overlap(point: DataPoint, steps: list[int]) -> float | None:
    ratios = []
    for trace in point.ranks.values():
        comm = sum(covered(_in_step(trace, n, True)) for n in steps)
        if comm > 0:
            both = sum(intersection(_in_step(trace, n, True), _in_step(trace, n, False)) for n in steps)
            ratios.append(both / comm)
    return _mean(ratios)


def _workers(point: DataPoint) -> list[RankTrace]:
    return [trace for rank, trace in point.ranks.items() if rank != point.server_rank]


def _straggler_delay_us(point: DataPoint, steps: list[int]) -> float | None:
    delays = []
    for n in steps:
        ends = [max(end for _, end in spans) for trace in _workers(point) if (spans := _in_step(trace, n))]
        if len(ends) >= 2:
            delays.append(max(ends) - statistics.median(ends))
    return _mean(delays)


def _load_imbalance(point: DataPoint, steps: list[int]) -> float | None:
    imbalances = []
    for n in steps:
        busy = [covered(_in_step(trace, n, False)) for trace in _workers(point) if _in_step(trace, n)]
        if busy and statistics.fmean(busy) > 0:
            imbalances.append(max(busy) / statistics.fmean(busy) - 1)
    return _mean(imbalances)


def compute_metrics(point: DataPoint) -> TraceMetrics:
    steps = measured_steps(point)
    per_rank = [_mean([trace.steps[n].end - trace.steps[n].start for n in steps if n in trace.steps])
                for trace in point.ranks.values()]
    step_time = _mean([value for value in per_rank if value is not None])
    delay = _straggler_delay_us(point, steps)
    return TraceMetrics(
        ranks=len(point.ranks),
        steps=len({n for trace in point.ranks.values() for n in trace.steps}),
        steps_measured=len(steps),
        avg_step_time_s=None if step_time is None else step_time * _US,
        communication_fraction=_communication_fraction(point, steps),
        compute_comm_overlap=_overlap(point, steps),
        straggler_delay_s=None if delay is None else delay * _US,
        load_imbalance=_load_imbalance(point, steps),
    )
