"""A control plane listening with mutual TLS: its SDK and daemon clients work, anyone else is refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from pydantic import ValidationError

from clients.executors.models import initial_weights
from control_plane.app import ControlPlane
from control_plane.tls import TransportSecurityError
from propius.channels import async_channel
from propius.config import ChannelSecurity, Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import AsyncJob
from propius.specs import JobSpec
from tests.security.tls_setup import Pki, make_pki

ROOT = Path(__file__).resolve().parents[2]
SPEC = JobSpec.parse({"name": "over-tls", "rounds": 1, "demand": 2, "over_selection": 1.0,
                      "schedule_timeout_s": 20, "execution_timeout_s": 20, "task": {"local_steps": 1}})


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory) -> Pki:
    """Another deployment's CA and certificates."""
    return make_pki(tmp_path_factory.mktemp("other-pki"))


@pytest.fixture
def no_plaintext(monkeypatch) -> None:
    monkeypatch.delenv("PROPIUS_INSECURE", raising=False)  # the suite's default (tests/conftest.py)


@pytest.fixture
async def mtls_plane(settings, pki, no_plaintext) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(pki.server(settings)) as plane:
        yield plane


async def _list_jobs(address: str, security: ChannelSecurity) -> pb.ListJobsResponse:
    async with async_channel(address, security) as channel:
        return await pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(), timeout=10)


async def test_the_sdk_and_a_daemon_train_a_round_over_mutual_tls(mtls_plane, pki, tmp_path) -> None:
    """``propius-client`` with its TLS options (a process, nothing from the environment) and the SDK."""
    assert mtls_plane.transport == "mtls"
    command = [sys.executable, "-m", "clients.daemon", "--server", mtls_plane.address, "--devices", "2",
               "--max-tasks", "1", "--state-dir", str(tmp_path / "devices"), "--tls-ca", str(pki.ca),
               "--tls-cert", str(pki.directory / "alice.crt"), "--tls-key", str(pki.directory / "alice.key")]
    log = tmp_path / "daemon.log"
    with log.open("w") as out:
        daemon = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=_env())
    try:
        async with AsyncJob(SPEC, mtls_plane.address, security=pki.client()) as job:
            result = await job.run_round(initial_weights(SPEC.task, seed=0), timeout_s=90)
        assert await asyncio.to_thread(daemon.wait, 60) == 0, log.read_text()[-3000:]  # each device did its task
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
    assert result.info.results == 2 and result.tensors


@pytest.mark.parametrize("client", ["no certificate", "certificate of another CA", "trusts another CA", "plaintext"])
async def test_other_clients_are_refused(mtls_plane, pki, stranger, client) -> None:
    security = {
        "no certificate": ChannelSecurity(tls_ca=pki.ca),
        "certificate of another CA": stranger.client().model_copy(update={"tls_ca": pki.ca}),
        "trusts another CA": stranger.client(),
        "plaintext": ChannelSecurity(insecure=True),
    }[client]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _list_jobs(mtls_plane.address, security)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert (await _list_jobs(mtls_plane.address, pki.client())).jobs is not None  # still serving its clients


async def test_tls_without_client_certificates_serves_any_client_that_trusts_it(settings, pki, no_plaintext) -> None:
    async with ControlPlane(pki.server(settings, mutual=False)) as plane:
        assert plane.transport == "tls"
        await _list_jobs(plane.address, ChannelSecurity(tls_ca=pki.ca))


def test_a_plane_with_neither_certificate_nor_insecure_refuses_to_start(settings, no_plaintext) -> None:
    with pytest.raises(TransportSecurityError, match="tls_cert and tls_key"):
        ControlPlane(settings.model_copy(update={"insecure": False}))


def test_contradictory_settings_are_refused(pki) -> None:
    with pytest.raises(ValidationError, match="exclude each other"):
        Settings(insecure=True, tls_cert=pki.directory / "server.crt", tls_key=pki.directory / "server.key")
    with pytest.raises(ValidationError, match="needs tls_ca"):
        Settings(insecure=False, tls_require_client_cert=True)
    with pytest.raises(ValidationError, match="go together"):
        ChannelSecurity(tls_cert=pki.directory / "alice.crt")


def _env() -> dict[str, str]:
    """This checkout on the path, no ``PROPIUS_*`` setting: what a process gets is what its options say."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PROPIUS_")} | {"PYTHONPATH": str(ROOT),
                                                                                   "COLUMNS": "200"}


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "propius.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


async def test_the_cli_reaches_the_plane_with_its_tls_options(mtls_plane, pki, tmp_path) -> None:
    env = _env()
    tls = ["--tls-ca", str(pki.ca), "--tls-cert", str(pki.directory / "alice.crt"),
           "--tls-key", str(pki.directory / "alice.key")]
    listed, refused, unconfigured = await asyncio.gather(
        asyncio.to_thread(_cli, "jobs", "--server", mtls_plane.address, *tls, env=env),
        asyncio.to_thread(_cli, "jobs", "--server", mtls_plane.address, "--tls-ca", str(pki.ca), env=env),
        asyncio.to_thread(_cli, "up", "--port", "0", "--data-dir", str(tmp_path / "up"), env=env))
    assert listed.returncode == 0, listed.stderr
    assert "job id" in listed.stdout
    assert refused.returncode == 1 and "refused the connection" in refused.stderr and "--tls-cert" in refused.stderr
    assert unconfigured.returncode == 2 and "no TLS certificate" in unconfigured.stderr, unconfigured.stderr
    assert not (tmp_path / "up").exists()  # refused before an embedded Redis or a database was started


async def test_plaintext_is_asked_for_and_logged_as_a_warning(settings, caplog) -> None:
    assert settings.insecure  # the suite's explicit PROPIUS_INSECURE=1
    async with ControlPlane(settings) as plane:
        assert plane.transport == "plaintext"
    assert any(r.levelname == "WARNING" and "plaintext" in r.getMessage() for r in caplog.records)


def test_a_wrong_certificate_file_is_named_before_anything_starts(settings, pki, no_plaintext) -> None:
    tls = pki.server(settings)
    with pytest.raises(TransportSecurityError, match="is not the key of tls_cert"):
        ControlPlane(tls.model_copy(update={"tls_key": pki.directory / "alice.key"}))
    with pytest.raises(TransportSecurityError, match="holds no PEM certificate"):
        ControlPlane(tls.model_copy(update={"tls_cert": pki.directory / "alice.key"}))
    with pytest.raises(TransportSecurityError, match="cannot read tls_ca"):
        ControlPlane(tls.model_copy(update={"tls_ca": pki.directory / "missing.crt"}))
