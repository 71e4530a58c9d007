"""A small certificate authority for one Propius deployment: what ``propius certs init`` writes.

One CA (ECDSA P-256) signs a server certificate, whose subject alternative names are the hosts clients
dial, and one certificate per client, for control planes that require mutual TLS. Keys are written
with mode 0600. An existing CA and existing certificates are kept, so running it again adds only what
is missing (a new client name is signed by the CA already there); ``force`` replaces everything.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA_NAME", "DEFAULT_HOSTS", "SERVER_NAME", "CertsError", "CertsReport", "client_names", "init_certs"]

CA_NAME = "ca"
SERVER_NAME = "server"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_CA_DAYS = 3650


class CertsError(ValueError):
    """A request ``init_certs`` cannot fulfil (a bad name, a CA certificate without its key)."""


@dataclass
class CertsReport:
    """The files ``init_certs`` wrote and those it found and kept."""

    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _Issuer:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def client_names(clients: Sequence[str]) -> list[str]:
    """``["3"]`` -> client-0, client-1, client-2; otherwise the names as given, checked."""
    if len(clients) == 1 and clients[0].isdigit():
        return [f"client-{i}" for i in range(int(clients[0]))]
    for name in clients:
        if not _NAME.fullmatch(name) or name in (CA_NAME, SERVER_NAME):
            raise CertsError(f"invalid client name {name!r}: letters, digits, '_', '.', '-', not 'ca' or 'server'")
    if len(set(clients)) != len(clients):
        raise CertsError("client names repeat")
    return list(clients)


def init_certs(directory: Path, hosts: Sequence[str] = DEFAULT_HOSTS, clients: Sequence[str] = ("1",), *,
               days: int = 825, force: bool = False) -> CertsReport:
    """Write ``ca.crt``/``ca.key``, ``server.crt``/``server.key`` (SAN: ``hosts``, names or IP addresses) and
    ``NAME.crt``/``NAME.key`` for each client into ``directory``; what exists is kept unless ``force``."""
    names = client_names(clients)
    if not hosts:
        raise CertsError("the server certificate needs at least one host name or address")
    directory.mkdir(parents=True, exist_ok=True)
    report = CertsReport()
    issuer = _certificate_authority(directory, force, report)
    _leaf(directory, SERVER_NAME, issuer, days, force, report, hosts=hosts)
    for name in names:
        _leaf(directory, name, issuer, days, force, report)
    return report


def _paths(directory: Path, name: str) -> tuple[Path, Path]:
    return directory / f"{name}.crt", directory / f"{name}.key"


def _certificate_authority(directory: Path, force: bool, report: CertsReport) -> _Issuer:
    cert_path, key_path = _paths(directory, CA_NAME)
    if not force and cert_path.exists():
        if not key_path.exists():
            raise CertsError(f"{cert_path} exists without {key_path.name}: cannot sign with it (use force to "
                             "start over with a new CA)")
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise CertsError(f"{key_path} is not an EC private key")
        report.kept += [cert_path, key_path]
        return _Issuer(x509.load_pem_x509_certificate(cert_path.read_bytes()), key)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Propius CA")])
    builder = (_builder(subject, subject, key.public_key(), _CA_DAYS)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True))
    cert = builder.sign(key, hashes.SHA256())
    _write(cert_path, key_path, cert, key, report)
    return _Issuer(cert, key)


def _leaf(directory: Path, name: str, issuer: _Issuer, days: int, force: bool, report: CertsReport,
          hosts: Sequence[str] = ()) -> None:
    cert_path, key_path = _paths(directory, name)
    if not force and cert_path.exists() and key_path.exists():
        report.kept += [cert_path, key_path]
        return
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else name)])
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (_builder(subject, issuer.cert.subject, key.public_key(), days)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
                              critical=False)
               .add_extension(x509.SubjectAlternativeName(_alt_names(hosts or [name])), critical=False))
    _write(cert_path, key_path, builder.sign(issuer.key, hashes.SHA256()), key, report)


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
             days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little behind still accept it
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False))


def _write(cert_path: Path, key_path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
           report: CertsReport) -> None:
    """The key first, created with mode 0600 (never readable by others, even for an instant)."""
    key_path.unlink(missing_ok=True)
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    report.written += [cert_path, key_path]
