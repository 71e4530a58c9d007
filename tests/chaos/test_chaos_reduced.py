"""The chaos suite, reduced: two jobs on two daemons, real redis-server and PostgreSQL, and two faults
(kill -9 of the control plane, Redis restarted empty). Nothing may be lost or run twice."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from benchmarks.chaos import ChaosConfig, run_chaos

PG_URL = os.environ.get("PROPIUS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server on PATH")


@pytest.mark.timeout(300)  # about 45 s alone; a loaded 2-core machine can take several times that
def test_control_plane_kill_and_redis_restart_lose_nothing(tmp_path) -> None:
    # Tasks (3 s) outlast client_ttl_s (2 s): a binding lives as long as its client heartbeats.
    config = ChaosConfig(seed=0, faults=("cp_kill", "redis_restart"), jobs=2, rounds=3, daemons=2, devices=2,
                         train_s=3.0, client_ttl_s=2.0, recovery_timeout_s=60.0, run_timeout_s=180.0, pg_url=PG_URL)
    report = asyncio.run(run_chaos(config, tmp_path))

    assert [fault.fault for fault in report.faults] == ["cp_kill", "redis_restart"]
    for fault in report.faults:
        assert fault.recovery_s is not None, fault
        assert (fault.rounds_lost, fault.rounds_run_twice, fault.accepted_updates_lost) == (0, 0, 0), fault
    assert report.driver_errors == []
    assert report.jobs_with_right_rounds == report.jobs_total == 2
    assert report.non_terminal_rows == {"jobs_live": 0, "rounds_open": 0, "bindings_bound": 0}
