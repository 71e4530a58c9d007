"""Durable state: jobs, rounds, bindings and the audit log, in SQLite (default) or PostgreSQL.

Redis holds the hot, TTL'd state; this store holds what must outlive a control-plane restart: a
restarted control plane reloads every non-finished job and open round from here. Calls are
synchronous and short, so the async control plane runs them through ``asyncio.to_thread``; bindings
and events arrive write-behind in batches, so each batch is one transaction and one executemany.

Callers get frozen dataclasses, never ORM objects, so no session or lazy load leaks out of a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Double,
    Engine,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    Update,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    inspect,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

__all__ = [
    "AttemptEnd",
    "BINDING_OUTCOMES",
    "JOB_STATES",
    "ROUND_STATES",
    "BindingOutcome",
    "BindingRecord",
    "EventRecord",
    "JobRecord",
    "RoundRecord",
    "Store",
    "TraceEventRecord",
    "create_tables",
]

JOB_STATES = ("registered", "running", "completed", "cancelled")
ROUND_STATES = ("open", "closed", "failed")
BINDING_OUTCOMES = ("bound", "completed", "dropped", "released")
_FINISHED_JOB_STATES = ("completed", "cancelled")


# ---------------------------------------------------------------- records (the public return types)


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    owner: str
    spec_json: str
    token_hash: str  # sha256 hex of the job token; the token itself is never stored
    state: str
    rounds_done: int
    created_at: float
    finished_at: float | None


@dataclass(frozen=True)
class RoundRecord:
    """One attempt at a round; a failed round is retried as the same round with ``attempt + 1``."""

    job_id: str
    round: int
    attempt: int
    demand: int
    target: int
    started_at: float
    deadline_at: float
    state: str = "open"
    results: int = 0
    closed_at: float | None = None
    metrics_json: str = "{}"
    model_digest: str = ""
    aggregate_digest: str = ""  # set when the round closed: the checkpoint of its aggregate


@dataclass(frozen=True)
class BindingRecord:
    job_id: str
    round: int
    attempt: int
    client_id: str
    bound_at: float
    outcome: str = "bound"
    finished_at: float | None = None
    num_samples: float | None = None
    id: int | None = None  # assigned by the database


@dataclass(frozen=True)
class BindingOutcome:
    """How a binding ended, keyed by (job_id, round, attempt, client_id)."""

    job_id: str
    round: int
    attempt: int
    client_id: str
    outcome: str
    finished_at: float
    num_samples: float | None = None


@dataclass(frozen=True)
class AttemptEnd:
    """A round attempt ended: its bindings still ``bound`` are ``released`` (their clients' work is moot)."""

    job_id: str
    round: int
    attempt: int
    finished_at: float


@dataclass(frozen=True)
class EventRecord:
    at: float
    kind: str
    job_id: str | None = None
    client_id: str | None = None
    detail_json: str = "{}"
    id: int | None = None  # assigned by the database


@dataclass(frozen=True)
class TraceEventRecord:
    """One timed span of a job's execution trace, on the control plane's clock (unix microseconds).

    ``rank`` 0 is the aggregator; ranks 1..K are the round's cohort slots (see :mod:`propius.trace`).
    """

    job_id: str
    round: int
    rank: int
    name: str
    cat: str
    ts_us: int
    dur_us: int
    args_json: str = "{}"
    id: int | None = None  # assigned by the database


# ---------------------------------------------------------------- tables


def _one_of(table: str, column: str, values: Sequence[str]) -> CheckConstraint:
    """Reject a misspelt state in the database itself, whichever layer wrote it."""
    allowed = ", ".join(f"'{value}'" for value in values)
    return CheckConstraint(f"{column} IN ({allowed})", name=f"ck_{table}_{column}")


class _Base(DeclarativeBase):
    type_annotation_map = {float: Double, str: String}


class _Job(_Base):
    __tablename__ = "jobs"
    __table_args__ = (_one_of("jobs", "state", JOB_STATES),)

    job_id: Mapped[str] = mapped_column(primary_key=True)
    name: Mapped[str]
    owner: Mapped[str]
    spec_json: Mapped[str] = mapped_column(Text)
    token_hash: Mapped[str]
    state: Mapped[str]
    rounds_done: Mapped[int]
    created_at: Mapped[float]
    finished_at: Mapped[float | None]


class _Round(_Base):
    __tablename__ = "rounds"
    __table_args__ = (_one_of("rounds", "state", ROUND_STATES),)

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.job_id"), primary_key=True)
    round: Mapped[int] = mapped_column(primary_key=True)
    attempt: Mapped[int] = mapped_column(primary_key=True)
    demand: Mapped[int]
    target: Mapped[int]
    state: Mapped[str]
    results: Mapped[int]
    started_at: Mapped[float]
    deadline_at: Mapped[float]
    closed_at: Mapped[float | None]
    metrics_json: Mapped[str] = mapped_column(Text)
    model_digest: Mapped[str]
    aggregate_digest: Mapped[str] = mapped_column(server_default="")


class _Binding(_Base):
    __tablename__ = "bindings"
    __table_args__ = (
        _one_of("bindings", "outcome", BINDING_OUTCOMES),
        Index("ix_bindings_client_id", "client_id"),
        Index("ix_bindings_job_round", "job_id", "round"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.job_id"))
    round: Mapped[int]
    attempt: Mapped[int]
    client_id: Mapped[str]
    bound_at: Mapped[float]
    outcome: Mapped[str]
    finished_at: Mapped[float | None]
    num_samples: Mapped[float | None]


class _Event(_Base):
    """Audit log. No foreign key: an event may be about a client alone; a batch never fails on a job row."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    at: Mapped[float]
    job_id: Mapped[str | None] = mapped_column(index=True)
    client_id: Mapped[str | None]
    kind: Mapped[str]
    detail_json: Mapped[str] = mapped_column(Text)


class _TraceEvent(_Base):
    __tablename__ = "trace_events"
    __table_args__ = (Index("ix_trace_events_job_round", "job_id", "round"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.job_id"))
    round: Mapped[int]
    rank: Mapped[int]
    name: Mapped[str]
    cat: Mapped[str]
    ts_us: Mapped[int] = mapped_column(BigInteger)
    dur_us: Mapped[int] = mapped_column(BigInteger)
    args_json: Mapped[str] = mapped_column(Text)


_R = TypeVar("_R")


def _record(cls: type[_R], row: _Base) -> _R:
    """Copy an ORM row into its record: tables and records share their field names."""
    return cls(**{f.name: getattr(row, f.name) for f in fields(cls)})  # type: ignore[arg-type]


def _shallow(record: Any) -> dict[str, Any]:
    """A flat record's fields (``asdict`` deep-copies, several times slower on the journal's batches)."""
    return {field.name: getattr(record, field.name) for field in fields(record)}


def _insert_values(record: Any) -> dict[str, Any]:
    """A record as insert parameters, leaving a database-assigned id to the database."""
    values = _shallow(record)
    if values.get("id") is None:
        values.pop("id", None)
    return values


def _on_sqlite_connect(dbapi_connection: Any, _connection_record: Any) -> None:
    """WAL lets readers run beside the writer; busy_timeout makes a second writer wait, not fail."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
    cursor.execute("PRAGMA foreign_keys=ON")  # same integrity as PostgreSQL
    cursor.close()


# ---------------------------------------------------------------- the store


def create_tables(engine: Engine, metadata: MetaData, attempts: int = 5) -> None:
    """Create ``metadata``'s missing tables. Control planes starting together race between the check and the
    CREATE ("table already exists"); the loser checks again and finds the winner's tables."""
    for attempt in range(attempts):
        try:
            metadata.create_all(engine)
            return
        except DBAPIError:
            if attempt == attempts - 1:
                raise


# Columns added to existing tables since their first release: (table, column, DDL type with its default).
_NEW_COLUMNS = (("rounds", "aggregate_digest", "VARCHAR NOT NULL DEFAULT ''"),)


def _add_new_columns(engine: Engine, schema: str | None) -> None:
    """Give tables that an earlier release created the columns added since (``create_all`` adds none)."""
    for table, column, ddl in _NEW_COLUMNS:
        if column in {c["name"] for c in inspect(engine).get_columns(table, schema=schema)}:
            continue
        qualified = f'"{schema}".{table}' if schema else table
        try:
            with engine.begin() as connection:
                connection.execute(text(f"ALTER TABLE {qualified} ADD COLUMN {column} {ddl}"))
        except DBAPIError:  # another control plane starting at the same time added it first
            if column not in {c["name"] for c in inspect(engine).get_columns(table, schema=schema)}:
                raise


class Store:
    """The durable store. ``schema`` (PostgreSQL only) names an existing schema to hold the tables."""

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        engine = create_engine(url, pool_pre_ping=True)
        if engine.dialect.name == "sqlite":
            if schema is not None:
                engine.dispose()
                raise ValueError("schema is supported on PostgreSQL only")
            event.listen(engine, "connect", _on_sqlite_connect)
        if schema is not None:
            engine = engine.execution_options(schema_translate_map={None: schema})
        self._engine = engine
        self._session = sessionmaker(engine, expire_on_commit=False)
        create_tables(engine, _Base.metadata)
        _add_new_columns(engine, schema)

    @property
    def engine(self) -> Engine:
        """Shared with :class:`control_plane.identity_store.IdentityStore` (one pool per database)."""
        return self._engine

    def close(self) -> None:
        self._engine.dispose()

    # ------------------------------------------------------------ jobs

    def create_job(
        self, job_id: str, name: str, owner: str, spec_json: str, token_hash: str, created_at: float
    ) -> JobRecord:
        record = JobRecord(job_id, name, owner, spec_json, token_hash, "registered", 0, created_at, None)
        with self._session.begin() as session:
            session.execute(insert(_Job), [asdict(record)])
        return record

    def get_job(self, job_id: str) -> JobRecord | None:
        with self._session() as session:
            row = session.get(_Job, job_id)
            return None if row is None else _record(JobRecord, row)

    def list_jobs(self, include_finished: bool = True) -> list[JobRecord]:
        """Jobs in registration order; without finished ones this is what a restart reloads."""
        query = select(_Job).order_by(_Job.created_at, _Job.job_id)
        if not include_finished:
            query = query.where(_Job.state.not_in(_FINISHED_JOB_STATES))
        with self._session() as session:
            return [_record(JobRecord, row) for row in session.scalars(query)]

    def set_job_state(self, job_id: str, state: str, finished_at: float | None = None) -> None:
        statement = update(_Job).where(_Job.job_id == job_id).values(state=state, finished_at=finished_at)
        self._update_one(statement, f"job {job_id}")

    def expire_registered(self, registered_before: float, finished_at: float) -> list[str]:
        """Cancel the jobs registered before ``registered_before`` that never started; their ids. Only a job
        still ``registered`` is changed, so one another shard has just started is left running."""
        with self._session.begin() as session:
            ids = list(session.scalars(select(_Job.job_id).where(
                _Job.state == "registered", _Job.created_at < registered_before)))
            cancelled = []
            for job_id in ids:
                result = session.execute(update(_Job).where(_Job.job_id == job_id, _Job.state == "registered")
                                         .values(state="cancelled", finished_at=finished_at))
                if result.rowcount:
                    cancelled.append(job_id)
        return cancelled

    def set_rounds_done(self, job_id: str, n: int) -> None:
        self._update_one(update(_Job).where(_Job.job_id == job_id).values(rounds_done=n), f"job {job_id}")

    # ------------------------------------------------------------ rounds

    def start_round(self, record: RoundRecord) -> None:
        """Insert the attempt; a retry of the same insert (its reply was lost) leaves the row as it is."""
        with self._session.begin() as session:
            key = (record.job_id, record.round, record.attempt)
            if session.get(_Round, key) is None:
                session.execute(insert(_Round), [asdict(record)])

    def finish_round(
        self,
        job_id: str,
        round: int,
        attempt: int,
        state: str,
        results: int,
        closed_at: float,
        metrics_json: str = "{}",
        aggregate_digest: str = "",
    ) -> RoundRecord:
        """Move an open attempt to ``state``: the commit point of a round's end. One transaction sets the row
        and, for a close, the job's ``rounds_done``. Exactly once: an attempt that already ended keeps its
        end, and the row as it stands is returned for the caller to follow."""
        values = {"state": state, "results": results, "closed_at": closed_at, "metrics_json": metrics_json,
                  "aggregate_digest": aggregate_digest}
        with self._session.begin() as session:
            row = session.get(_Round, (job_id, round, attempt), with_for_update=True)
            if row is None:
                raise KeyError(f"no such round {job_id}/{round}.{attempt}")
            if row.state == "open":
                for name, value in values.items():
                    setattr(row, name, value)
                if state == "closed":
                    session.execute(update(_Job).where(_Job.job_id == job_id, _Job.rounds_done < round + 1)
                                    .values(rounds_done=round + 1))
            return _record(RoundRecord, row)

    def latest_round(self, job_id: str) -> RoundRecord | None:
        """The job's newest attempt, the one a recovery continues from."""
        query = (select(_Round).where(_Round.job_id == job_id)
                 .order_by(_Round.round.desc(), _Round.attempt.desc()).limit(1))
        with self._session() as session:
            row = session.scalars(query).first()
            return None if row is None else _record(RoundRecord, row)

    def set_round_model(self, job_id: str, round: int, attempt: int, digest: str) -> None:
        statement = update(_Round).where(*_round_key(job_id, round, attempt)).values(model_digest=digest)
        self._update_one(statement, f"round {job_id}/{round}.{attempt}")

    def rounds(self, job_id: str) -> list[RoundRecord]:
        query = select(_Round).where(_Round.job_id == job_id).order_by(_Round.round, _Round.attempt)
        with self._session() as session:
            return [_record(RoundRecord, row) for row in session.scalars(query)]

    # ------------------------------------------------------------ bindings

    def record_bindings(self, rows: Sequence[BindingRecord]) -> None:
        """Insert bindings once: a client binds to an attempt at most once, so a binding already here (a
        journal batch written again, delivery being at least once) is skipped rather than duplicated."""
        if not rows:
            return
        key = (_Binding.job_id, _Binding.round, _Binding.attempt, _Binding.client_id)
        with self._session.begin() as session:
            wanted = {(row.job_id, row.round, row.attempt, row.client_id): row for row in rows}
            present = session.execute(select(*key).where(tuple_(*key).in_(list(wanted)))).all()
            for found in present:
                wanted.pop(tuple(found), None)
            if wanted:
                session.execute(insert(_Binding), [_insert_values(row) for row in wanted.values()])

    def finish_bindings(self, updates: Sequence[BindingOutcome]) -> None:
        """Set how each binding ended, all in one transaction and one executemany. A binding ends once: an
        outcome never replaces another (a lease that Redis lost track of, reaped after its update was
        accepted, must not turn ``completed`` into ``dropped``)."""
        if not updates:
            return
        statement = (
            update(_Binding)
            .where(
                _Binding.job_id == bindparam("k_job_id"),
                _Binding.round == bindparam("k_round"),
                _Binding.attempt == bindparam("k_attempt"),
                _Binding.client_id == bindparam("k_client_id"),
                _Binding.outcome == "bound",
            )
            .values(
                outcome=bindparam("k_outcome"),
                finished_at=bindparam("k_finished_at"),
                num_samples=bindparam("k_num_samples"),
            )
        )
        self._execute_many(statement, updates)

    def release_bindings(self, ends: Sequence[AttemptEnd]) -> None:
        """Mark the bindings of ended attempts that are still ``bound`` as ``released``, in one transaction."""
        if not ends:
            return
        statement = (
            update(_Binding)
            .where(
                _Binding.job_id == bindparam("k_job_id"),
                _Binding.round == bindparam("k_round"),
                _Binding.attempt == bindparam("k_attempt"),
                _Binding.outcome == "bound",
            )
            .values(outcome="released", finished_at=bindparam("k_finished_at"))
        )
        self._execute_many(statement, ends)

    def _execute_many(self, statement: Any, records: Sequence[Any]) -> None:
        """``statement`` once per record, in one transaction and one executemany; a record's fields bind
        as ``k_<field>`` (plain names would clash with the columns the statement sets)."""
        params = [{f"k_{name}": value for name, value in _shallow(record).items()} for record in records]
        with self._session.begin() as session:
            session.connection().execute(statement, params)

    def bindings(self, job_id: str, round: int | None = None) -> list[BindingRecord]:
        query = select(_Binding).where(_Binding.job_id == job_id).order_by(_Binding.id)
        if round is not None:
            query = query.where(_Binding.round == round)
        with self._session() as session:
            return [_record(BindingRecord, row) for row in session.scalars(query)]

    def tasks_done_by_client(self) -> dict[str, int]:
        """Completed bindings per client, for ``ListClients``' ``tasks_done``."""
        query = (
            select(_Binding.client_id, func.count())
            .where(_Binding.outcome == "completed")
            .group_by(_Binding.client_id)
        )
        with self._session() as session:
            return {client_id: count for client_id, count in session.execute(query)}

    # ------------------------------------------------------------ events

    def record_events(self, rows: Sequence[EventRecord]) -> None:
        if not rows:
            return
        with self._session.begin() as session:
            session.execute(insert(_Event), [_insert_values(row) for row in rows])

    def events(self, job_id: str | None = None, limit: int = 1000, kind: str | None = None) -> list[EventRecord]:
        """The newest ``limit`` events (of one job, of one kind, if given), oldest first."""
        query = select(_Event).order_by(_Event.id.desc()).limit(limit)
        if job_id is not None:
            query = query.where(_Event.job_id == job_id)
        if kind is not None:
            query = query.where(_Event.kind == kind)
        with self._session() as session:
            newest_first = [_record(EventRecord, row) for row in session.scalars(query)]
        return newest_first[::-1]

    # ------------------------------------------------------------ traces

    def record_trace_events(self, rows: Sequence[TraceEventRecord]) -> None:
        if not rows:
            return
        with self._session.begin() as session:
            session.execute(insert(_TraceEvent), [_insert_values(row) for row in rows])

    def trace_events(self, job_id: str) -> list[TraceEventRecord]:
        """A job's trace, ordered by (round, rank, start)."""
        query = (select(_TraceEvent).where(_TraceEvent.job_id == job_id)
                 .order_by(_TraceEvent.round, _TraceEvent.rank, _TraceEvent.ts_us, _TraceEvent.id))
        with self._session() as session:
            return [_record(TraceEventRecord, row) for row in session.scalars(query)]

    # ------------------------------------------------------------ helpers

    def _update_one(self, statement: Update, what: str) -> None:
        """Run a keyed UPDATE; a missing row is a caller bug, so it raises instead of passing silently."""
        with self._session.begin() as session:
            if session.connection().execute(statement).rowcount == 0:
                raise KeyError(f"no such {what}")


def _round_key(job_id: str, round: int, attempt: int) -> tuple[Any, ...]:
    return _Round.job_id == job_id, _Round.round == round, _Round.attempt == attempt
