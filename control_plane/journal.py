"""Write-behind journal of bindings, outcomes and audit events into the durable store.

Binding is on the hot path (thousands per second); SQL writes are batched off that path and flushed by
the scheduler loop (and on shutdown), one transaction per batch.

With a ``spill_dir`` every record is also appended to a local write-ahead file before it is queued, and
a binding's and an accepted update's records are flushed to the operating system before the Accept or
the upload is acknowledged, so a killed control plane loses none of them: the next control plane on
that ``data_dir`` (or a shard taking over its rounds) adopts the files of a dead one and writes them to
SQL. A batch the database cannot take (an outage) stays queued and its
file stays on disk until a later flush succeeds; a batch the database refuses outright is moved aside
to ``rejected-*.jsonl`` for an operator, never silently dropped. Delivery is at least once: a crash
between a commit and the removal of its file writes that batch again.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from control_plane.errors import is_outage
from control_plane.store import AttemptEnd, BindingOutcome, BindingRecord, EventRecord, Store, TraceEventRecord

__all__ = ["Journal"]

log = logging.getLogger(__name__)

_KINDS: dict[str, type] = {
    "binding": BindingRecord, "outcome": BindingOutcome, "event": EventRecord, "trace": TraceEventRecord,
    "end": AttemptEnd,
}


@dataclass
class _Queue:
    """Records waiting for SQL, by kind (bindings first: an outcome updates the row its binding inserted)."""

    bindings: list[BindingRecord] = field(default_factory=list)
    outcomes: list[BindingOutcome] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    traces: list[TraceEventRecord] = field(default_factory=list)
    ends: list[AttemptEnd] = field(default_factory=list)

    def _lists(self) -> dict[str, list[Any]]:
        return {"binding": self.bindings, "outcome": self.outcomes, "event": self.events, "trace": self.traces,
                "end": self.ends}

    def __len__(self) -> int:
        return sum(len(records) for records in self._lists().values())

    def add(self, kind: str, record: Any) -> None:
        self._lists()[kind].append(record)

    def take(self, n: int) -> _Queue:
        batch = _Queue(*(records[:n] for records in self._lists().values()))
        for records in self._lists().values():
            del records[:n]
        return batch

    def put_back(self, batch: _Queue) -> None:
        for records, returned in zip(self._lists().values(), batch._lists().values(), strict=True):
            records[:0] = returned

    def lines(self) -> list[str]:
        return [_line(kind, record) for kind, records in self._lists().items() for record in records]


def _line(kind: str, record: Any) -> str:
    return json.dumps({"kind": kind, "record": record.__dict__}) + "\n"


class _Spill:
    """This journal's write-ahead files in ``directory``: ``wal-<owner>-<seq>.jsonl``, the owner alive while
    it holds ``wal-<owner>.lock``."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._owner = uuid.uuid4().hex[:12]
        self._lock_file = (directory / f"wal-{self._owner}.lock").open("w")
        fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._seq = 0
        self._current: IO[str] = self._open_next()
        self.sealed: list[Path] = []

    def _open_next(self) -> IO[str]:
        self._seq += 1
        return (self._dir / f"wal-{self._owner}-{self._seq:08d}.jsonl").open("a", encoding="utf-8")

    def append(self, line: str, sync: bool = False) -> None:
        self._current.write(line)
        if sync:
            self._current.flush()

    def seal(self) -> None:
        """Close the current file (its records are about to be written); new records go to a fresh one."""
        self._current.close()
        self.sealed.append(Path(self._current.name))
        self._current = self._open_next()

    def written(self) -> None:
        """Every sealed file's records are in SQL."""
        for path in self.sealed:
            path.unlink(missing_ok=True)
        self.sealed.clear()

    def reject(self, lines: list[str]) -> Path:
        path = self._dir / f"rejected-{self._owner}-{time.time_ns()}.jsonl"
        path.write_text("".join(lines), encoding="utf-8")
        return path

    def adopt_orphans(self) -> list[tuple[str, dict[str, Any]]]:
        """The records of journals whose process died; their files become this journal's sealed files."""
        entries: list[tuple[str, dict[str, Any]]] = []
        for lock_path in sorted(self._dir.glob("wal-*.lock")):
            owner = lock_path.stem.removeprefix("wal-")
            if owner == self._owner:
                continue
            with lock_path.open("a") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live journal
                for path in sorted(self._dir.glob(f"wal-{owner}-*.jsonl")):
                    entries.extend(_read(path))
                    self.sealed.append(path)
                lock_path.unlink(missing_ok=True)
        return entries

    def close(self, flushed: bool) -> None:
        """Stop writing; when everything is in SQL, remove the files, else leave them to the next journal."""
        self._current.close()
        if flushed:
            Path(self._current.name).unlink(missing_ok=True)
            self.written()
            (self._dir / f"wal-{self._owner}.lock").unlink(missing_ok=True)
        self._lock_file.close()


def _read(path: Path) -> list[tuple[str, dict[str, Any]]]:
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            entries.append((entry["kind"], entry["record"]))
        except (ValueError, KeyError):
            log.warning("journal: skipping a torn line in %s", path)  # the last line of a killed writer
    return entries


class Journal:
    """Queues records for SQL (see the module docstring)."""

    def __init__(self, store: Store, max_batch: int = 2000, spill_dir: Path | None = None) -> None:
        self._store = store
        self._max_batch = max_batch
        self._queue = _Queue()
        self._spill = _Spill(spill_dir) if spill_dir is not None else None
        self._lock = asyncio.Lock()

    def adopt_orphans(self) -> int:
        """Queue the records that dead control planes left on disk; how many."""
        if self._spill is None:
            return 0
        entries = self._spill.adopt_orphans()
        for kind, values in entries:
            self._queue.add(kind, _KINDS[kind](**values))
        return len(entries)

    def _add(self, kind: str, record: Any, sync: bool = False) -> None:
        if self._spill is not None:
            self._spill.append(_line(kind, record), sync)
        self._queue.add(kind, record)

    def bound(self, job_id: str, round_: int, attempt: int, client_id: str) -> None:
        """A binding; on disk when this returns (the row an accepted update's outcome will be written to)."""
        self._add("binding", BindingRecord(job_id=job_id, round=round_, attempt=attempt, client_id=client_id,
                                           bound_at=time.time(), outcome="bound", finished_at=None,
                                           num_samples=None), sync=True)

    def finished(self, job_id: str, round_: int, attempt: int, client_id: str, outcome: str,
                 num_samples: float | None = None) -> None:
        """How a binding ended; an accepted update ("completed") is on disk when this returns."""
        record = BindingOutcome(job_id=job_id, round=round_, attempt=attempt, client_id=client_id,
                                outcome=outcome, finished_at=time.time(), num_samples=num_samples)
        self._add("outcome", record, sync=outcome == "completed")

    def event(self, kind: str, job_id: str | None = None, client_id: str | None = None, **detail: object) -> None:
        self._add("event", EventRecord(at=time.time(), job_id=job_id, client_id=client_id, kind=kind,
                                       detail_json=json.dumps(detail, default=str)))

    def attempt_ended(self, job_id: str, round_: int, attempt: int) -> None:
        """A round attempt ended: its bindings that are still ``bound`` (their leases lost with Redis, or
        journaled late) become ``released`` once written."""
        self._add("end", AttemptEnd(job_id=job_id, round=round_, attempt=attempt, finished_at=time.time()))

    def traces(self, spans: list[TraceEventRecord]) -> None:
        for span in spans:
            self._add("trace", span)

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def flush(self) -> None:
        """Write what is queued; on a database outage keep it (and its files) for the next flush."""
        async with self._lock:
            if not self.pending:
                return
            if self._spill is not None:
                self._spill.seal()
            while self.pending:
                batch = self._queue.take(self._max_batch)
                try:
                    await asyncio.to_thread(self._write, batch)
                except Exception as error:  # noqa: BLE001 - decided below: kept for retry or set aside
                    if is_outage(error):
                        self._queue.put_back(batch)
                        log.warning("journal: store unavailable, %d records kept for retry", self.pending)
                        return
                    where = self._spill.reject(batch.lines()) if self._spill is not None else None
                    log.exception("journal: the store refused a batch of %d records (kept in %s)", len(batch), where)
            if self._spill is not None:
                self._spill.written()

    def close(self) -> None:
        """Stop; records that did not reach SQL stay on disk for the next control plane on this data_dir."""
        if self._spill is not None:
            self._spill.close(flushed=not self.pending)

    def _write(self, batch: _Queue) -> None:
        # Bindings first: an outcome updates the row its binding inserted.
        if batch.bindings:
            self._store.record_bindings(batch.bindings)
        if batch.outcomes:
            self._store.finish_bindings(batch.outcomes)
        if batch.events:
            self._store.record_events(batch.events)
        if batch.traces:
            self._store.record_trace_events(batch.traces)
        if batch.ends:
            self._store.release_bindings(batch.ends)
