"""Every store test runs against a SQLite file and the shared PostgreSQL server.

Each PostgreSQL test gets a freshly created schema of its own, dropped afterwards, so tests running
side by side (or in other projects) on the same server never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.schema import CreateSchema, DropSchema

from control_plane.store import JobRecord, Store

PG_URL = os.environ.get("PROPIUS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@dataclass(frozen=True)
class Backend:
    """Where a test's store lives; ``open()`` again on it is what a restarted control plane does."""

    url: str
    schema: str | None = None

    def open(self) -> Store:
        return Store(self.url, schema=self.schema)


@pytest.fixture(scope="session")
def pg_engine() -> Iterator[Engine]:
    engine = create_engine(PG_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except OperationalError as error:
        engine.dispose()
        shown = make_url(PG_URL).render_as_string(hide_password=True)
        reason = str(error.orig or error).splitlines()[0]
        pytest.skip(f"PostgreSQL unreachable at {shown} (set PROPIUS_TEST_PG_URL): {reason}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def pg_url(pg_engine: Engine) -> str:
    """The PostgreSQL URL, once the server answered."""
    return PG_URL


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend(f"sqlite:///{tmp_path / 'propius.db'}")
        return
    engine: Engine = request.getfixturevalue("pg_engine")
    schema = f"test_{uuid.uuid4().hex}"
    with engine.begin() as connection:
        connection.execute(CreateSchema(schema))
    try:
        yield Backend(PG_URL, schema)
    finally:
        with engine.begin() as connection:
            connection.execute(DropSchema(schema, cascade=True))


@pytest.fixture
def open_store(backend: Backend) -> Callable[[], Store]:
    """Open another Store on the test's database, as a restarted control plane would."""
    return backend.open


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()


@pytest.fixture
def make_job(store: Store) -> Callable[..., JobRecord]:
    """Register a job with throwaway spec and token hash; ``created_at`` orders jobs."""

    def make(job_id: str, created_at: float = 1000.0) -> JobRecord:
        return store.create_job(job_id, "job", "alice", '{"demand": 2}', "0" * 64, created_at)

    return make
