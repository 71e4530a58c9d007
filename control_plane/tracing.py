"""Execution traces of jobs, recorded as they run (exported as CCL-Bench data points by propius.trace).

Spans are kept per round attempt and written only when the round closes, so a failed attempt never
leaves a half round in the trace. Rank 0 is the aggregator; rank i >= 1 is the i-th cohort slot of
the round: the client whose update was accepted i-th. Client phase times arrive with the upload on
the device's clock and are moved onto the control plane's clock with the device's NTP-style offset
estimate. Bounded: rounds past ``max_rounds`` and ranks past ``max_ranks`` are not kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from control_plane.journal import Journal
from control_plane.store import TraceEventRecord

__all__ = ["ClientTimings", "TraceRecorder"]

KERNEL = "kernel"  # CCL-Bench reads kernels; ours are synthetic (no GPU kernel ran), args say so
STEP = "user_annotation"
_CLIENT_KEYS = ("fetch_start", "fetch_end", "train_start", "train_end", "upload_start")


def _us(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


@dataclass(frozen=True)
class ClientTimings:
    """A device's phase timestamps, already on the server clock."""

    fetch_start: float
    fetch_end: float
    train_start: float
    train_end: float
    upload_start: float
    clock_offset_s: float
    rtt_s: float

    @classmethod
    def parse(cls, raw: dict[str, float]) -> ClientTimings | None:
        """None when the device sent no (or inconsistent) timings: its slot then has no phase spans."""
        if not all(isinstance(raw.get(k), int | float) and math.isfinite(raw[k]) for k in _CLIENT_KEYS):
            return None
        offset = float(raw.get("clock_offset_s", 0.0))
        rtt = float(raw.get("rtt_s", 0.0))
        values = [float(raw[k]) + offset for k in _CLIENT_KEYS]
        if any(later < earlier for earlier, later in zip(values, values[1:], strict=False)):
            return None
        return cls(*values, clock_offset_s=offset, rtt_s=rtt)


@dataclass
class _Attempt:
    round: int
    attempt: int
    started_at: float
    spans: list[TraceEventRecord] = field(default_factory=list)
    slots: int = 0


class TraceRecorder:
    def __init__(self, journal: Journal, *, max_rounds: int, max_ranks: int) -> None:
        self._journal = journal
        self._max_rounds = max_rounds
        self._max_ranks = max_ranks
        self._open: dict[str, _Attempt] = {}

    def round_started(self, job_id: str, round_: int, attempt: int, started_at: float) -> None:
        if round_ < self._max_rounds:
            self._open[job_id] = _Attempt(round_, attempt, started_at)
        else:
            self._open.pop(job_id, None)

    def _span(self, job_id: str, round_: int, rank: int, name: str, cat: str, start: float, end: float,
              **args: object) -> None:
        current = self._open.get(job_id)
        if current is None or current.round != round_ or rank > self._max_ranks:
            return
        current.spans.append(TraceEventRecord(
            job_id=job_id, round=round_, rank=rank, name=name, cat=cat, ts_us=_us(start),
            dur_us=max(0, _us(end) - _us(start)), args_json=json.dumps(args),
        ))

    def model_published(self, job_id: str, round_: int, start: float, end: float, nbytes: int) -> None:
        self._span(job_id, round_, 0, "broadcast_model_publish", KERNEL, start, end, transport="grpc+redis",
                   bytes=nbytes, synthetic_kernel=True)

    def update_delivered(self, job_id: str, round_: int, client_id: str, timings: ClientTimings | None,
                         received_at: float, fold_start: float, fold_end: float, nbytes: int,
                         model_bytes: int) -> None:
        current = self._open.get(job_id)
        if current is None or current.round != round_:  # a late update of a round already closed
            return
        current.slots += 1
        rank = current.slots
        common = {"client_id": client_id, "synthetic_kernel": True}
        if timings is not None:
            self._span(job_id, round_, rank, "broadcast_model_fetch", KERNEL, timings.fetch_start,
                       timings.fetch_end, transport="grpc", bytes=model_bytes, **common)
            self._span(job_id, round_, rank, "local_training", KERNEL, timings.train_start, timings.train_end,
                       **common)
            self._span(job_id, round_, rank, "sendrecv_update_upload", KERNEL, timings.upload_start,
                       max(received_at, timings.upload_start), transport="grpc", bytes=nbytes,
                       clock_offset_s=timings.clock_offset_s, rtt_s=timings.rtt_s, **common)
        self._span(job_id, round_, 0, "fedavg_fold_update", KERNEL, fold_start, fold_end, bytes=nbytes, **common)

    def round_closed(self, job_id: str, round_: int, attempt: int, closed_at: float,
                     finalize_start: float, results: int, bound: int) -> None:
        current = self._open.get(job_id)
        if current is None or (current.round, current.attempt) != (round_, attempt):
            return
        self._span(job_id, round_, 0, "fedavg_finalize", KERNEL, finalize_start, closed_at, synthetic_kernel=True)
        for rank in range(0, min(current.slots, self._max_ranks) + 1):
            self._span(job_id, round_, rank, f"ProfilerStep#{round_}", STEP, current.started_at, closed_at,
                       results=results, bound=bound, attempt=attempt)
        del self._open[job_id]
        self._journal.traces(current.spans)

    def round_failed(self, job_id: str) -> None:
        self._open.pop(job_id, None)
