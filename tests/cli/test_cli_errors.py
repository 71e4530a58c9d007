"""Every CLI failure is its cause and its fix on one line each, exit code 1 (2: usage), no traceback, no token."""

from __future__ import annotations

import asyncio
import time

import yaml

from tests.cli.conftest import cli_env, propius


def _lines(result) -> list[str]:  # noqa: ANN001 - a CompletedProcess
    return (result.stdout + result.stderr).strip().splitlines()


def test_jobs_against_a_dead_server(tmp_path) -> None:
    began = time.monotonic()
    result = propius("jobs", "--server", "127.0.0.1:1", env=cli_env(tmp_path))
    assert time.monotonic() - began < 10
    assert result.returncode == 1
    lines = _lines(result)
    assert len(lines) == 2, lines
    assert lines[0].startswith("error: cannot reach the control plane at 127.0.0.1:1")
    assert lines[1] == "start one with `propius up`, or pass --server HOST:PORT"


def test_debug_shows_the_traceback(tmp_path) -> None:
    result = propius("--debug", "jobs", "--server", "127.0.0.1:1", env=cli_env(tmp_path))
    assert result.returncode == 1
    assert "Traceback" in result.stderr or "─ Traceback" in result.stderr


def test_up_with_an_unreachable_redis(tmp_path) -> None:
    result = propius("up", "--port", "0", "--redis-url", "redis://:hunter2@127.0.0.1:1", "--data-dir", str(tmp_path),
                     env=cli_env(tmp_path))
    assert result.returncode == 1
    lines = _lines(result)
    assert len(lines) == 2, lines
    assert lines[0].startswith("error: cannot use Redis at redis://:***@127.0.0.1:1: ")
    assert "hunter2" not in result.stdout + result.stderr


def test_up_with_a_missing_database(tmp_path, redis_url, key_prefix) -> None:
    result = propius("up", "--port", "0", "--redis-url", redis_url, "--database-url",
                     "postgresql+psycopg://127.0.0.1:5432/no_such_db", "--data-dir", str(tmp_path),
                     env=cli_env(tmp_path, PROPIUS_KEY_PREFIX=key_prefix))
    assert result.returncode == 1
    lines = _lines(result)
    assert len(lines) == 2, lines
    assert lines[0].startswith("error: cannot use the database postgresql+psycopg://127.0.0.1:5432/no_such_db: ")
    assert 'database "no_such_db" does not exist' in lines[0]


def test_usage_errors_exit_2(tmp_path) -> None:
    result = propius("up", "--port", "70000", "--redis-url", "redis://127.0.0.1:1", env=cli_env(tmp_path))
    assert result.returncode == 2
    assert _lines(result) == ["error: invalid port: Input should be less than or equal to 65535",
                              "see `propius COMMAND --help`"]


def _spec_file(tmp_path, **fields) -> str:
    spec = {"name": "cli-job", "demand": 2, "rounds": 1, **fields}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_submit_wait_against_a_dead_server_fails_at_once(tmp_path) -> None:
    began = time.monotonic()
    result = propius("submit", _spec_file(tmp_path), "--wait", "--server", "127.0.0.1:1", env=cli_env(tmp_path))
    assert time.monotonic() - began < 15  # the interpreter's start included; the RPC fails at once
    assert result.returncode == 1
    assert len(_lines(result)) == 2, _lines(result)
    assert _lines(result)[0].startswith("error: cannot reach the control plane at 127.0.0.1:1")


async def test_a_failing_submit_wait_says_why_and_shows_no_token(tmp_path, plane) -> None:
    spec = _spec_file(tmp_path, schedule_timeout_s=0.3, execution_timeout_s=0.3)
    env = cli_env(tmp_path)
    result = await asyncio.to_thread(propius, "submit", spec, "--wait", "--server", plane.address, env=env,
                                     timeout_s=90)
    assert result.returncode == 1, result.stdout + result.stderr
    tokens = list((tmp_path / "tokens").glob("*.token"))
    assert len(tokens) == 1, result.stdout + result.stderr
    token = tokens[0].read_text().strip()
    assert token and token not in result.stdout + result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    job_id = tokens[0].name.removesuffix(".token")
    assert error == [f"error: job cli-job ({job_id}) stopped: round 0 attempt 2 failed with 0 of 2 results: "
                     "only 0 eligible clients known"]
    assert "Traceback" not in result.stderr
    assert "cli-job: 0 eligible clients checked in within 120 s (demand 2)" in result.stdout.splitlines()
    assert result.stderr.splitlines()[0].startswith("warning: only 0 eligible clients checked in")


def test_up_with_a_bad_policy_profile_names_the_plugin_and_option(tmp_path, redis_url, key_prefix) -> None:
    profile = tmp_path / "bad.yaml"
    profile.write_text("name: bad\nplugins: [{plugin: straggler_guard, options: {slack: -3}}]\n")
    result = propius("up", "--port", "0", "--redis-url", redis_url, "--policy-profile", str(profile),
                     "--data-dir", str(tmp_path / "data"), env=cli_env(tmp_path, PROPIUS_KEY_PREFIX=key_prefix))
    assert result.returncode == 2
    lines = _lines(result)
    assert lines[0].startswith("error: profile 'bad': plug-in 'straggler_guard': option slack=-3: "), lines
