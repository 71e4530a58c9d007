"""``propius certs init``: a CA whose signature the server and client certificates carry, SANs as asked."""

from __future__ import annotations

import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from typer.testing import CliRunner

from propius.certs import CertsError, init_certs
from propius.cli import app


def _cert(path) -> x509.Certificate:  # noqa: ANN001 - a Path
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certificates_verify_against_the_ca_with_the_hosts_in_the_san(tmp_path) -> None:
    report = init_certs(tmp_path, hosts=["control-plane", "127.0.0.1"], clients=["2"])
    assert {p.name for p in report.written} == {f"{n}.{e}" for n in ("ca", "server", "client-0", "client-1")
                                                for e in ("crt", "key")}
    ca = _cert(tmp_path / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server = _cert(tmp_path / "server.crt")
    server.verify_directly_issued_by(ca)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["control-plane"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert ExtendedKeyUsageOID.SERVER_AUTH in server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    for name in ("client-0", "client-1"):
        client = _cert(tmp_path / f"{name}.crt")
        client.verify_directly_issued_by(ca)
        usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert ExtendedKeyUsageOID.CLIENT_AUTH in usage and ExtendedKeyUsageOID.SERVER_AUTH not in usage
    for key in tmp_path.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_a_rerun_keeps_what_exists_and_signs_new_clients_with_the_same_ca(tmp_path) -> None:
    init_certs(tmp_path, clients=["alice"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    report = init_certs(tmp_path, clients=["alice", "bob"])
    assert {p.name for p in report.written} == {"bob.crt", "bob.key"}
    assert all((tmp_path / name).read_bytes() == content for name, content in before.items())
    _cert(tmp_path / "bob.crt").verify_directly_issued_by(_cert(tmp_path / "ca.crt"))
    forced = init_certs(tmp_path, clients=["alice"], force=True)
    assert (tmp_path / "ca.crt").read_bytes() != before["ca.crt"]
    assert {p.name for p in forced.written} >= {"ca.crt", "ca.key", "server.crt", "alice.crt"}


def test_bad_requests_are_refused_before_anything_is_written(tmp_path) -> None:
    for clients in (["server"], ["../x"], ["a", "a"]):
        with pytest.raises(CertsError):
            init_certs(tmp_path / "new", clients=clients)
    assert not (tmp_path / "new").exists()
    (tmp_path / "ca.crt").write_text("a CA without its key")
    with pytest.raises(CertsError, match="ca.key"):
        init_certs(tmp_path)


def test_the_cli_writes_then_keeps(tmp_path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["certs", "init", "--dir", str(tmp_path), "--hosts", "localhost", "--clients", "d1"])
    assert first.exit_code == 0, first.output
    assert (tmp_path / "d1.key").is_file() and "wrote" in first.output
    second = runner.invoke(app, ["certs", "init", "--dir", str(tmp_path), "--hosts", "localhost", "--clients", "d1"])
    assert second.exit_code == 0 and "kept 6 existing files" in second.output
    refused = runner.invoke(app, ["certs", "init", "--dir", str(tmp_path), "--clients", "ca"])
    assert refused.exit_code == 2 and "invalid client name" in refused.output
