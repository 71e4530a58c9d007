"""The fabric's durable state in SQL: the loaded fabric, accelerator states, allocations, waiting requests.

Four tables beside the store's: ``fabric_meta`` (one row: the loaded fabric's validated document and a
version), ``fabric_states`` (accelerators whose state differs from the file's bare form),
``fabric_allocations`` (a job's allocation, whole) and ``fabric_pending`` (cloud requests waiting, with
why). Together they are a :class:`~propius.fabric.snapshot.FabricSnapshot` plus the queue, from which
:func:`~propius.fabric.snapshot.restore` rebuilds the in-memory state exactly.

Every change is one transaction that first moves the version from the one its caller read to the next
(compare-and-set on the meta row, which also takes its row lock on PostgreSQL), then writes the rows
that differ. Two control-plane shards changing the fabric at once: one commits, the other gets
:class:`StaleFabric`, re-reads and retries, so changes are serialised through the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import BigInteger, Double, Engine, String, Text, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from control_plane.store import create_tables
from propius.fabric.model import AcceleratorState
from propius.fabric.request import CloudRequest
from propius.fabric.snapshot import AllocationDoc, FabricSnapshot

__all__ = ["FabricRecord", "FabricStore", "Pending", "StaleFabric"]

_META_ID = 1
_V = TypeVar("_V")


class StaleFabric(Exception):
    """The fabric changed since the caller read it (another shard wrote first): re-read and retry."""


@dataclass(frozen=True)
class Pending:
    """A cloud request waiting for accelerators, and the placement's stated reason."""

    request: CloudRequest
    reason: str
    since: float


@dataclass(frozen=True)
class FabricRecord:
    """The durable fabric: its version, document (JSON of the validated fabric), snapshot and queue."""

    version: int
    document: str
    snapshot: FabricSnapshot
    pending: dict[str, Pending]


class _Base(DeclarativeBase):
    type_annotation_map = {float: Double, str: String}


class _Meta(_Base):
    __tablename__ = "fabric_meta"

    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    document: Mapped[str] = mapped_column(Text)
    loaded_at: Mapped[float]


class _State(_Base):
    __tablename__ = "fabric_states"

    accelerator: Mapped[str] = mapped_column(primary_key=True)
    state: Mapped[str]


class _Allocation(_Base):
    __tablename__ = "fabric_allocations"

    job_id: Mapped[str] = mapped_column(primary_key=True)
    allocation_json: Mapped[str] = mapped_column(Text)


class _Pending(_Base):
    __tablename__ = "fabric_pending"

    job_id: Mapped[str] = mapped_column(primary_key=True)
    request_json: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    since: Mapped[float]


class FabricStore:
    """The fabric tables on the control plane's engine (shared with :class:`control_plane.store.Store`)."""

    def __init__(self, engine: Engine) -> None:
        self._session = sessionmaker(engine, expire_on_commit=False)
        create_tables(engine, _Base.metadata)

    def version(self) -> int:
        """The stored version; 0 while no fabric was ever loaded."""
        with self._session() as session:
            return session.scalar(select(_Meta.version).where(_Meta.id == _META_ID)) or 0

    def read(self) -> FabricRecord | None:
        """The stored fabric, read in one transaction; None while none was loaded."""
        with self._session() as session, session.begin():
            meta = session.get(_Meta, _META_ID)
            if meta is None:
                return None
            states = {row.accelerator: AcceleratorState(row.state) for row in session.scalars(select(_State))}
            allocations = {row.job_id: AllocationDoc.model_validate_json(row.allocation_json)
                           for row in session.scalars(select(_Allocation))}
            pending = {row.job_id: Pending(CloudRequest.model_validate_json(row.request_json), row.reason, row.since)
                       for row in session.scalars(select(_Pending))}
            return FabricRecord(meta.version, meta.document,
                                FabricSnapshot(states=states, allocations=allocations), pending)

    def commit(self, old: FabricRecord | None, new: FabricRecord, now: float) -> None:
        """Write ``new`` over ``old`` (what the caller read, None: nothing loaded) as one transaction; only the
        rows that differ are written. StaleFabric if the stored version is no longer ``old``'s."""
        if new.version != (old.version if old else 0) + 1:
            raise ValueError("a change moves the version by one")
        try:
            with self._session.begin() as session:
                self._advance(session, old, new, now)
                before = old.snapshot if old else FabricSnapshot()
                before_pending = old.pending if old else {}
                _write(session, _State, "accelerator", before.states, new.snapshot.states,
                       lambda key, value: {"accelerator": key, "state": value.value})
                _write(session, _Allocation, "job_id", before.allocations, new.snapshot.allocations,
                       lambda key, value: {"job_id": key, "allocation_json": value.model_dump_json()})
                _write(session, _Pending, "job_id", before_pending, new.pending,
                       lambda key, value: {"job_id": key, "request_json": value.request.model_dump_json(),
                                           "reason": value.reason, "since": value.since})
        except IntegrityError:  # another shard inserted the first meta row (or a row) first
            raise StaleFabric("the fabric changed meanwhile") from None

    @staticmethod
    def _advance(session: Session, old: FabricRecord | None, new: FabricRecord, now: float) -> None:
        if old is None:
            session.execute(insert(_Meta), [{"id": _META_ID, "version": new.version, "document": new.document,
                                             "loaded_at": now}])
            return
        values: dict[str, object] = {"version": new.version}
        if new.document != old.document:
            values.update(document=new.document, loaded_at=now)
        moved = session.execute(update(_Meta).where(_Meta.id == _META_ID, _Meta.version == old.version)
                                .values(**values))
        if moved.rowcount != 1:
            raise StaleFabric(f"the fabric is no longer at version {old.version}")


def _write(session: Session, table: type[_Base], key: str, old: Mapping[str, _V], new: Mapping[str, _V],
           row: Callable[[str, _V], dict[str, object]]) -> None:
    """Delete the rows of ``old`` that ``new`` drops or changes, insert those ``new`` adds or changes."""
    gone = [k for k, v in old.items() if new.get(k) != v]
    added = [k for k, v in new.items() if old.get(k) != v]
    column = getattr(table, key)
    if gone:
        session.execute(delete(table).where(column.in_(gone)))
    if added:
        session.execute(insert(table), [row(k, new[k]) for k in added])
