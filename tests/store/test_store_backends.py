"""Backend-specific guarantees: SQLite's WAL and busy timeout, PostgreSQL schemas."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.schema import CreateSchema, DropSchema

from control_plane.store import Store


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "propius.db"
    with closing(Store(f"sqlite:///{path}")) as store:
        store.create_job("j1", "n", "o", "{}", "0" * 64, 1.0)
        with closing(sqlite3.connect(path)) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_sqlite_writer_waits_for_a_held_lock_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "propius.db"
    with closing(Store(f"sqlite:///{path}")) as store:
        holder = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        releaser = threading.Timer(0.5, holder.execute, args=("COMMIT",))
        releaser.start()
        started = time.perf_counter()
        store.create_job("j1", "n", "o", "{}", "0" * 64, 1.0)
        waited = time.perf_counter() - started
        releaser.join()
        holder.close()

        assert waited >= 0.4
        assert store.get_job("j1") is not None


def test_sqlite_has_no_schemas(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PostgreSQL"):
        Store(f"sqlite:///{tmp_path / 'propius.db'}", schema="other")


def test_postgres_schemas_isolate_stores(pg_engine: Engine, pg_url: str) -> None:
    schemas = [f"test_{uuid.uuid4().hex}" for _ in range(2)]
    with pg_engine.begin() as connection:
        for schema in schemas:
            connection.execute(CreateSchema(schema))
    try:
        with (
            closing(Store(pg_url, schema=schemas[0])) as one,
            closing(Store(pg_url, schema=schemas[1])) as two,
        ):
            one.create_job("j1", "n", "o", "{}", "0" * 64, 1.0)
            assert two.get_job("j1") is None
            assert [j.job_id for j in one.list_jobs()] == ["j1"]
    finally:
        with pg_engine.begin() as connection:
            for schema in schemas:
                connection.execute(DropSchema(schema, cascade=True))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_control_planes_starting_together_share_one_schema(backend, tmp_path: Path, request) -> None:
    """Several stores created at once on a fresh database (shards starting together) all come up."""
    url = f"sqlite:///{tmp_path / 'propius.db'}" if backend == "sqlite" else request.getfixturevalue("pg_database_url")
    stores: list[Store] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            stores.append(Store(url))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors and len(stores) == 4
        stores[0].create_job("j1", "n", "o", "{}", "0" * 64, 1.0)
        assert [job.job_id for job in stores[3].list_jobs()] == ["j1"]
    finally:
        for store in stores:
            store.close()
