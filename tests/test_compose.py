"""docker-compose.yml stays runnable: every command is an installed console script that imports."""

from __future__ import annotations

import importlib
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def commands(service: dict) -> list[list[str]]:
    """The command lines a service runs: its command, or each line of an ``sh -ec`` script."""
    command = service["command"]
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if argv[:2] == ["sh", "-ec"]:
        return [shlex.split(line) for line in argv[2].splitlines() if line.strip()]
    return [argv]


PROPIUS_SERVICES = {
    name: commands(service)
    for name, service in COMPOSE["services"].items()
    if "command" in service and "build" in service
}


def test_services_of_the_cluster() -> None:
    services = COMPOSE["services"]
    assert services["redis"]["image"] == "redis:7"
    assert services["postgres"]["image"] == "postgres:16"
    assert services["postgres"]["environment"]["POSTGRES_HOST_AUTH_METHOD"] == "trust"
    assert "control-plane" in PROPIUS_SERVICES and "demo-job" in PROPIUS_SERVICES
    daemons = [argv for lines in PROPIUS_SERVICES.values() for argv in lines if argv[0] == "propius-client"]
    assert len(daemons) >= 2
    offsets = [argv[argv.index("--device-offset") + 1] for argv in daemons]
    assert len(set(offsets)) == len(offsets), "daemons must simulate different devices"


@pytest.mark.parametrize("service", sorted(PROPIUS_SERVICES))
def test_command_is_an_importable_console_script(service: str) -> None:
    for argv in PROPIUS_SERVICES[service]:
        script = argv[0]
        assert script in SCRIPTS, f"{service}: {script!r} is not in [project.scripts]"
        module_name, _, attribute = SCRIPTS[script].partition(":")
        target = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        assert callable(target)


def _compose_cli() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_cli_accepts_the_file() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    result = subprocess.run([*cli, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
