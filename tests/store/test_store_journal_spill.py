"""The journal's write-ahead files: records of a control plane killed before its flush reach SQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from control_plane.journal import Journal
from control_plane.store import Store

_KILLED_PLANE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from control_plane.journal import Journal
    from control_plane.store import Store
    journal = Journal(Store(sys.argv[1]), spill_dir=Path(sys.argv[2]))
    journal.bound("j1", 0, 0, "dev")
    journal.event("round_started", "j1", round=0)
    journal.finished("j1", 0, 0, "dev", "completed", 3.0)  # acknowledged to the device after this returns
    os._exit(0)  # killed: no flush, no close
""")


def test_records_of_a_killed_journal_are_written_by_the_next(tmp_path: Path, sqlite_store: Store,
                                                            sqlite_url: str) -> None:
    sqlite_store.create_job("j1", "job", "alice", '{"demand": 2}', "0" * 64, 1000.0)
    spill = tmp_path / "journal"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", _KILLED_PLANE, sqlite_url, str(spill)], check=True, env=env, timeout=60)
    assert sqlite_store.bindings("j1") == []

    journal = Journal(sqlite_store, spill_dir=spill)
    assert journal.adopt_orphans() == 3
    assert journal.adopt_orphans() == 0  # adopted once
    asyncio.run(journal.flush())
    journal.close()
    [binding] = sqlite_store.bindings("j1")
    assert (binding.client_id, binding.outcome, binding.num_samples) == ("dev", "completed", 3.0)
    assert [event.kind for event in sqlite_store.events("j1")] == ["round_started"]
    assert list(spill.iterdir()) == []  # nothing left to replay


def test_a_live_journal_is_not_adopted(tmp_path: Path, sqlite_store: Store) -> None:
    live = Journal(sqlite_store, spill_dir=tmp_path)
    live.bound("j1", 0, 0, "dev")
    assert Journal(sqlite_store, spill_dir=tmp_path).adopt_orphans() == 0
    live.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'propius.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str):
    store = Store(sqlite_url)
    yield store
    store.close()
