"""Write-behind journal of bindings, outcomes and audit events into the durable store.

Binding is on the hot path (thousands per second); SQL writes are batched off that path and flushed by
the scheduler loop (and on shutdown), one transaction per batch.
"""

from __future__ import annotations

import asyncio
import json
import time

from control_plane.store import BindingOutcome, BindingRecord, EventRecord, Store, TraceEventRecord

__all__ = ["Journal"]


class Journal:
    def __init__(self, store: Store, max_batch: int = 2000) -> None:
        self._store = store
        self._max_batch = max_batch
        self._bindings: list[BindingRecord] = []
        self._outcomes: list[BindingOutcome] = []
        self._events: list[EventRecord] = []
        self._traces: list[TraceEventRecord] = []
        self._lock = asyncio.Lock()

    def bound(self, job_id: str, round_: int, attempt: int, client_id: str) -> None:
        self._bindings.append(
            BindingRecord(job_id=job_id, round=round_, attempt=attempt, client_id=client_id,
                          bound_at=time.time(), outcome="bound", finished_at=None, num_samples=None)
        )

    def finished(self, job_id: str, round_: int, attempt: int, client_id: str, outcome: str,
                 num_samples: float | None = None) -> None:
        self._outcomes.append(
            BindingOutcome(job_id=job_id, round=round_, attempt=attempt, client_id=client_id,
                           outcome=outcome, finished_at=time.time(), num_samples=num_samples)
        )

    def event(self, kind: str, job_id: str | None = None, client_id: str | None = None, **detail: object) -> None:
        self._events.append(
            EventRecord(at=time.time(), job_id=job_id, client_id=client_id, kind=kind,
                        detail_json=json.dumps(detail, default=str))
        )

    def traces(self, spans: list[TraceEventRecord]) -> None:
        self._traces.extend(spans)

    @property
    def pending(self) -> int:
        return len(self._bindings) + len(self._outcomes) + len(self._events) + len(self._traces)

    async def flush(self) -> None:
        async with self._lock:
            while self.pending:
                bindings, self._bindings = self._bindings[: self._max_batch], self._bindings[self._max_batch:]
                outcomes, self._outcomes = self._outcomes[: self._max_batch], self._outcomes[self._max_batch:]
                events, self._events = self._events[: self._max_batch], self._events[self._max_batch:]
                traces, self._traces = self._traces[: self._max_batch], self._traces[self._max_batch:]
                await asyncio.to_thread(self._write, bindings, outcomes, events, traces)

    def _write(self, bindings: list[BindingRecord], outcomes: list[BindingOutcome], events: list[EventRecord],
               traces: list[TraceEventRecord]) -> None:
        # Bindings first: an outcome updates the row its binding inserted.
        if bindings:
            self._store.record_bindings(bindings)
        if outcomes:
            self._store.finish_bindings(outcomes)
        if events:
            self._store.record_events(events)
        if traces:
            self._store.record_trace_events(traces)
