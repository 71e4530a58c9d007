"""``propius up --dashboard-port P --log-format json``: the page is served and log lines are JSON objects."""

from __future__ import annotations

import json

from tests.cli.conftest import Running, cli_env
from tests.dashboard.conftest import free_port, get


def test_up_serves_the_dashboard_and_logs_json(tmp_path, redis_url, key_prefix) -> None:
    port = free_port()
    env = cli_env(tmp_path, PROPIUS_KEY_PREFIX=key_prefix)
    plane = Running("up", "--redis-url", redis_url, "--port", "0", "--data-dir", str(tmp_path),
                    "--dashboard-port", str(port), "--log-format", "json", env=env)
    try:
        # logged once every port is up, the dashboard's included
        listening = json.loads(plane.wait_for_line('"control plane listening on'))
        assert (listening["level"], listening["logger"]) == ("info", "control_plane.app")
        state = json.loads(get(f"http://127.0.0.1:{port}/api/state").body)
        assert (state["policy"], state["jobs"]) == ("propius", [])
    finally:
        plane.stop()
