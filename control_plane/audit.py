"""The audit log: who made each state-changing call, on what, and how it ended; rows in SQL.

Rows are buffered and written once per scheduler tick (one transaction), like the event journal: a
crash loses at most a tick's rows. The table is bounded twice, by age and by a row cap, since an
authenticated caller's refused calls also leave rows; calls refused as UNAUTHENTICATED leave none (no
identity to record, and anyone on the network could fill the table with them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from control_plane.errors import ServiceError
from control_plane.identity_store import AuditRecord, IdentityStore
from propius.specs import SpecError

__all__ = ["AuditLog", "Entry"]

log = logging.getLogger(__name__)

_MAX_TARGET = 128  # a target is a request's id, not yet validated when a call is refused
_MAX_BUFFERED = 100_000  # rows waiting for a flush while the database is down; the oldest are dropped beyond


@dataclass
class Entry:
    target: str


class AuditLog:
    def __init__(self, identities: IdentityStore, max_rows: int, retention_s: float) -> None:
        self._identities = identities
        self._max_rows = max_rows
        self._retention_s = retention_s
        self._rows: list[AuditRecord] = []
        self.dropped = 0  # rows lost to the buffer bound (logged once per flush)

    def record(self, actor: str, method: str, target: str, outcome: str) -> None:
        self._rows.append(AuditRecord(time.time(), actor, method, target[:_MAX_TARGET], outcome))
        if len(self._rows) > _MAX_BUFFERED:
            del self._rows[0]
            self.dropped += 1

    @contextlib.asynccontextmanager
    async def call(self, actor: str, method: str, target: str) -> AsyncIterator[Entry]:
        """Record the call wrapped in this block with the status it ends with (OK when it returns); the block
        may name its target once it knows it (a new job's id)."""
        entry = Entry(target)
        try:
            yield entry
        except ServiceError as error:
            if error.code != grpc.StatusCode.UNAUTHENTICATED:  # an unknown enrolment token: nobody to record
                self.record(actor, method, entry.target, error.code.name)
            raise
        except SpecError:
            self.record(actor, method, entry.target, "INVALID_ARGUMENT")
            raise
        except Exception:
            self.record(actor, method, entry.target, "ERROR")
            raise
        self.record(actor, method, entry.target, "OK")

    async def flush(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        try:
            await asyncio.to_thread(self._identities.record_audit, rows, self._max_rows,
                                    time.time() - self._retention_s)
        except Exception:
            self._rows[:0] = rows  # kept for the next tick (the bound above still holds)
            raise
        if self.dropped:
            log.warning("audit log: %d rows dropped while the database was unavailable", self.dropped)
            self.dropped = 0
