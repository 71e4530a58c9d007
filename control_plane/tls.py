"""How the control plane listens: TLS, mutual TLS, or plaintext when asked for explicitly.

A control plane with neither a certificate nor ``insecure`` refuses to start rather than fall back to
plaintext: a forgotten setting must not open the service to the network.
"""

from __future__ import annotations

from pathlib import Path

import grpc

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
    ca = _read(settings.tls_ca, "tls_ca") if settings.tls_ca is not None else None
    return grpc.ssl_server_credentials([(_read(settings.tls_key, "tls_key"), _read(settings.tls_cert, "tls_cert"))],
                                       root_certificates=ca, require_client_auth=settings.tls_require_client_cert)


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TransportSecurityError(f"cannot read {setting} {path}: {error.strerror}") from None
