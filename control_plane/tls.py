"""How the control plane listens: TLS, mutual TLS, or plaintext when asked for explicitly.

A control plane with neither a certificate nor ``insecure`` refuses to start rather than fall back to
plaintext: a forgotten setting must not open the service to the network.
"""

from __future__ import annotations

from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from propius.config import Settings

__all__ = ["TransportSecurityError", "server_credentials"]


class TransportSecurityError(ValueError):
    """The settings name no way to listen (no certificate, no ``insecure``) or a certificate file is unreadable."""


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials (with ``tls_require_client_cert``: clients must present a certificate signed by
    ``tls_ca``); None for plaintext (the plane logs a warning once it listens)."""
    if settings.tls_cert is None or settings.tls_key is None:
        if not settings.insecure:
            raise TransportSecurityError(
                "no TLS certificate: set tls_cert and tls_key (--tls-cert/--tls-key or PROPIUS_TLS_CERT/"
                "PROPIUS_TLS_KEY; `propius certs init` makes them), or ask for plaintext with insecure "
                "(--insecure or PROPIUS_INSECURE=1)")
        return None
    cert, key = _read(settings.tls_cert, "tls_cert"), _read(settings.tls_key, "tls_key")
    ca = _read(settings.tls_ca, "tls_ca") if settings.tls_ca is not None else None
    _check_pem(settings, cert, key, ca)
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=settings.tls_require_client_cert)


def _check_pem(settings: Settings, cert: bytes, key: bytes, ca: bytes | None) -> None:
    """gRPC reports a bad certificate or key only as a port it failed to add: say which file is wrong."""
    try:
        chain = x509.load_pem_x509_certificates(cert)
    except ValueError:
        raise TransportSecurityError(f"tls_cert {settings.tls_cert} holds no PEM certificate") from None
    try:
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError):
        raise TransportSecurityError(f"tls_key {settings.tls_key} holds no unencrypted PEM private key") from None
    if private.public_key() != chain[0].public_key():
        raise TransportSecurityError(f"tls_key {settings.tls_key} is not the key of tls_cert {settings.tls_cert}")
    if ca is not None:
        try:
            x509.load_pem_x509_certificates(ca)
        except ValueError:
            raise TransportSecurityError(f"tls_ca {settings.tls_ca} holds no PEM certificate") from None


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TransportSecurityError(f"cannot read {setting} {path}: {error.strerror}") from None
