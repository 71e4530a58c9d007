"""A device's credential: enrolled once with a token from the operator, kept in a file, reused on restart.

``propius devices token create`` gives the operator an enrolment token; a daemon started with
``--enroll-token`` trades it for one credential per device it hosts (``ClientService.Enroll``), each
bound to that device's client id, and keeps them in a JSON file of mode 0600 next to the client ids
(``--state-dir``). A restart reads them back and enrols nobody again: the server binds a client id once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import grpc

from clients.identity import DeviceIdentity
from clients.rate_hint import throttled
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.retry_after import RetryBudget

__all__ = ["Credentials", "enroll_devices"]

log = logging.getLogger(__name__)


class Credentials:
    """client id -> device credential, in memory and (with a ``path``) in a file only this user reads."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._tokens: dict[str, str] = {}
        if path is not None and path.exists():
            loaded = json.loads(path.read_text())
            if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
                raise ValueError(f"{path}: not a credential file (a JSON object of client id -> credential)")
            self._tokens = loaded

    def get(self, client_id: str) -> str:
        return self._tokens.get(client_id, "")

    def save(self, client_id: str, credential: str) -> None:
        self._tokens[client_id] = credential
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump(self._tokens, file)
        partial.replace(self.path)  # atomic: a crash leaves the old file or the new one


async def enroll_devices(channel: grpc.aio.Channel, devices: Sequence[DeviceIdentity], token: str,
                         credentials: Credentials, timeout_s: float = 10.0,
                         rate_limit: RetryBudget = RetryBudget()) -> None:  # noqa: B008 - frozen
    """Enrol each device that has no credential yet, with ``token``; a rate limit is waited out within
    ``rate_limit``; raises the server's refusal."""
    stub = pb_grpc.ClientServiceStub(channel)
    for device in devices:
        if credentials.get(device.client_id):
            continue
        request = pb.EnrollRequest(enrolment_token=token, client_id=device.client_id)
        reply = await throttled(lambda: stub.Enroll(request, timeout=timeout_s), rate_limit)  # noqa: B023
        credentials.save(reply.client_id, reply.device_token)
        log.info("device %s enrolled", device.client_id)
