"""Time covered by sets of spans: the metrics measure covered time, never summed durations, so two
overlapping transfers on one rank count once."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Interval", "clip", "covered", "intersection", "union"]

Interval = tuple[float, float]


def union(spans: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time as ``spans`` (empty spans dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(span for span in spans if span[1] > span[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def covered(spans: Iterable[Interval]) -> float:
    return sum(end - start for start, end in union(spans))


def intersection(a: Iterable[Interval], b: Iterable[Interval]) -> float:
    """Time covered by both ``a`` and ``b``."""
    left, right = union(a), union(b)
    total, i, j = 0.0, 0, 0
    while i < len(left) and j < len(right):
        start, end = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        total += max(0.0, end - start)
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return total


def clip(span: Interval, window: Interval) -> Interval | None:
    """The part of ``span`` inside ``window``, or None when they do not overlap. An instant (a zero-length
    span) inside the window is kept: it covers no time, but it still marks when a rank was last active."""
    if span[0] == span[1]:
        return span if window[0] <= span[0] < window[1] else None
    start, end = max(span[0], window[0]), min(span[1], window[1])
    return (start, end) if end > start else None
