"""docker-compose.yml runs the cluster with mutual TLS and publishes nothing beyond this machine."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _argv(name: str) -> list[str]:
    return [str(part) for part in SERVICES[name]["command"]]


def test_certificates_come_first_and_reach_every_service_read_only() -> None:
    assert _argv("certs")[:3] == ["propius", "certs", "init"]
    assert SERVICES["control-plane"]["depends_on"]["certs"]["condition"] == "service_completed_successfully"
    for name, service in SERVICES.items():
        if "build" in service and name not in ("certs", "identities"):  # identities: the database only
            assert "certs:/certs:ro" in service["volumes"], name


def test_the_control_plane_requires_client_certificates_and_is_published_on_loopback_only() -> None:
    argv = _argv("control-plane")
    assert "--require-client-cert" in argv and "--insecure" not in argv
    assert {"--tls-cert", "--tls-key", "--tls-ca"} <= set(argv)
    assert all(port.startswith("127.0.0.1:") for port in SERVICES["control-plane"]["ports"])
    assert "secure_channel" in SERVICES["control-plane"]["healthcheck"]["test"][-1]


def test_every_client_presents_its_own_certificate() -> None:
    issued = set(_argv("certs")[_argv("certs").index("--clients"):][1::2])
    clients = [name for name, s in SERVICES.items()
               if "build" in s and name not in ("certs", "identities", "control-plane")]
    presented = []
    for name in clients:
        argv = _argv(name)
        assert argv[argv.index("--tls-ca") + 1] == "/certs/ca.crt", name
        presented.append(Path(argv[argv.index("--tls-cert") + 1]).stem)
        assert argv[argv.index("--tls-key") + 1] == f"/certs/{presented[-1]}.key", name
    assert len(set(presented)) == len(clients) and set(presented) <= issued
