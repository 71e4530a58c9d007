"""Certificates and settings the TLS tests share (a module, not a conftest: tests/security/ is shared)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from propius.certs import init_certs
from propius.config import ChannelSecurity, Settings


@dataclass(frozen=True)
class Pki:
    """What ``propius certs init --clients alice`` wrote into ``directory``."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    def client(self, name: str = "alice") -> ChannelSecurity:
        """A client trusting this CA, with ``name``'s certificate."""
        return ChannelSecurity(tls_ca=self.ca, tls_cert=self.directory / f"{name}.crt",
                               tls_key=self.directory / f"{name}.key")

    def server(self, base: Settings, *, mutual: bool = True) -> Settings:
        """``base`` listening with this CA's server certificate; ``mutual``: client certificates required."""
        return base.model_validate({**base.model_dump(), "insecure": False, "tls_cert": self.directory / "server.crt",
                                    "tls_key": self.directory / "server.key", "tls_ca": self.ca,
                                    "tls_require_client_cert": mutual})


def make_pki(directory: Path) -> Pki:
    init_certs(directory, clients=["alice"])
    return Pki(directory)
