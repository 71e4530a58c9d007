"""docker-compose.yml runs auth in ``keys`` mode: its ``identities`` bootstrap, run here as written (the real
CLI on a real SQLite file instead of the cluster's PostgreSQL), issues the keys and the enrolment token the
demo job and the daemons read, and keeps them on a rerun; a keyed control plane on that database serves them.
The compose file itself is only parsed here (no Docker daemon runs in the test environment)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import yaml
from typer.testing import CliRunner

from propius.cli import app
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import api_key_metadata
from tests.conftest import eventually
from tests.security.auth_setup import keyed_plane
from tests.test_compose import commands

ROOT = Path(__file__).resolve().parents[2]
SERVICES = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
DAEMONS = [name for name, service in SERVICES.items()
           if "command" in service and commands(service)[0][0] == "propius-client"]


def _local(path: str, secrets: Path) -> str:
    return str(secrets / Path(path).relative_to("/secrets")) if path.startswith("/secrets/") else path


def test_the_control_plane_runs_keys_after_the_bootstrap() -> None:
    plane = SERVICES["control-plane"]
    argv = commands(plane)[0]
    assert argv[argv.index("--auth") + 1] == "keys" and "PROPIUS_AUTH" not in plane.get("environment", {})
    assert plane["depends_on"]["identities"]["condition"] == "service_completed_successfully"
    assert SERVICES["identities"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "secrets:/secrets" in SERVICES["identities"]["volumes"]
    assert "secrets:/secrets:ro" in SERVICES["demo-job"]["volumes"]
    for name in DAEMONS:  # each keeps its client ids and credentials across restarts
        assert "secrets:/secrets:ro" in SERVICES[name]["volumes"]
        state = commands(SERVICES[name])[0][commands(SERVICES[name])[0].index("--state-dir") + 1]
        assert any(volume.endswith(f":{state}") for volume in SERVICES[name]["volumes"]), name


def _bootstrap(secrets: Path, database_url: str) -> list[str]:
    """Each line of the ``identities`` service, run by the real CLI against ``database_url``."""
    outputs = []
    for argv in commands(SERVICES["identities"]):
        assert argv[0] == "propius"
        args = [_local(arg, secrets) for arg in argv[1:]]
        result = CliRunner().invoke(app, args, env={"PROPIUS_DATABASE_URL": database_url})
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    return outputs


async def test_the_bootstrap_issues_what_the_job_and_the_daemons_read(settings, tmp_path, monkeypatch) -> None:
    secrets = tmp_path / "secrets"
    await asyncio.to_thread(_bootstrap, secrets, settings.database_url)
    files = {path.name: path.read_text() for path in secrets.iterdir()}
    assert set(files) == {"demo-job.key", "operator.key", "enrolment.token"}
    assert all(stat.S_IMODE((secrets / name).stat().st_mode) == 0o600 for name in files)
    rerun = await asyncio.to_thread(_bootstrap, secrets, settings.database_url)
    assert all("kept, nothing created" in output for output in rerun)
    assert {path.name: path.read_text() for path in secrets.iterdir()} == files

    async with keyed_plane(settings, auth_cache_s=60.0) as plane:
        assert len(plane.identities.keys()) == 2 and len(plane.identities.enrolments()) == 1
        job_env = SERVICES["demo-job"]["environment"]
        monkeypatch.setenv("PROPIUS_API_KEY_FILE", _local(job_env["PROPIUS_API_KEY_FILE"], secrets))
        async with grpc.aio.insecure_channel(plane.address) as channel:
            await pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(), metadata=api_key_metadata())
            operator = api_key_metadata(files["operator.key"].strip())
            await pb_grpc.ClientServiceStub(channel).ListClients(pb.ListClientsRequest(), metadata=operator)

        daemon = SERVICES[DAEMONS[0]]
        state = tmp_path / "state"
        argv = _daemon_argv(commands(daemon)[0], plane.address, state)
        env = {**os.environ, "PYTHONPATH": str(ROOT),
               "PROPIUS_ENROLL_TOKEN_FILE": _local(daemon["environment"]["PROPIUS_ENROLL_TOKEN_FILE"], secrets)}
        process = subprocess.Popen([sys.executable, "-m", "clients.daemon", *argv], env=env, cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            devices = int(argv[argv.index("--devices") + 1])

            async def enrolled() -> bool:
                assert process.poll() is None, process.communicate()[1][-2000:]
                return (state / "credentials.json").exists() and len(plane.identities.devices()) == devices

            await eventually(enrolled, timeout_s=60.0, what="the daemon's devices to enrol")
        finally:
            process.terminate()
            process.wait(timeout=30)
    credentials = json.loads((state / "credentials.json").read_text())
    assert len(credentials) == devices and all(value.startswith("pd_") for value in credentials.values())


def _daemon_argv(argv: list[str], server: str, state: Path) -> list[str]:
    """A compose daemon's options, here: this plane, a local state dir, plaintext on loopback."""
    local, words = [], iter(argv[1:])
    for word in words:
        if word in ("--tls-ca", "--tls-cert", "--tls-key"):
            next(words)
        elif word in ("--server", "--state-dir"):
            next(words)
            local += [word, server if word == "--server" else str(state)]
        else:
            local.append(word)
    return [*local, "--insecure"]
