"""Who is calling, and may they: API keys for job submitters, credentials for devices, rate limits.

Job calls carry ``authorization: Bearer <API key>``; device calls carry ``x-propius-device-token:
<credential>`` (on a Multiplex stream, each call's ``device_token``), or come over mutual TLS with a
client certificate whose common name is the client id. A missing or unknown credential is
UNAUTHENTICATED; a known one without the role, or acting on another owner's job or another device's
client id, is PERMISSION_DENIED; a caller over its rate is RESOURCE_EXHAUSTED with the wait in the
message (the rate limits' token buckets are in Redis, shared by every shard: :mod:`control_plane.shared_rate_limit`).
Every check runs before the handler reads or writes anything, so a refused call leaves no trace but its
caller's rate-limit bucket, which expires.

In open mode (``Settings.auth == "open"``, the demo) every caller is :data:`OPEN`, allowed everything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from control_plane.errors import Conflict, PermissionDenied, ResourceExhausted, Unauthenticated
from control_plane.identity_store import EnrolmentRefused, IdentityStore, Role, Secret
from control_plane.redis_client import AnyRedis
from control_plane.redis_pipe import ScriptedPipe
from control_plane.scheduling.state import ActiveJob
from control_plane.shared_rate_limit import SharedRateLimiter
from propius.config import Settings
from propius.proto import DEVICE_TOKEN_HEADER as DEVICE_HEADER
from propius.retry_after import retry_after_text
from propius.specs import JobSpec

__all__ = ["OPEN", "Caller", "Guard", "check_drive", "check_read", "owned_spec"]

_BEARER = "bearer "
T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: a key's owner and roles, or a device's bound client id."""

    actor: str  # as the audit log records it
    owner: str = ""
    roles: frozenset[str] = frozenset()
    client_id: str = ""
    open: bool = False

    def has(self, role: Role) -> bool:
        return self.open or role in self.roles or "admin" in self.roles

    def require(self, role: Role) -> None:
        if not self.has(role):
            raise PermissionDenied(f"{self.actor}: the {role!r} role is required")

    def owns(self, job: ActiveJob) -> bool:
        """Sees the job's private requirements and task: its owner only (an admin neither)."""
        return self.open or (bool(self.owner) and self.owner == job.spec.owner)

    def may_read(self, job: ActiveJob) -> bool:
        return self.owns(job) or self.has("read")

    def may_drive(self, job: ActiveJob) -> bool:
        return self.owns(job) or "admin" in self.roles


OPEN = Caller(actor="open", open=True)


def _metadata(context: grpc.aio.ServicerContext, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value if isinstance(value, str) else ""
    return ""


def _certificate_name(context: grpc.aio.ServicerContext) -> str:
    """The verified client certificate's common name under mutual TLS; '' otherwise."""
    names = (context.auth_context() or {}).get("x509_common_name") or []
    return names[0].decode(errors="replace") if names else ""


def _peer_host(context: grpc.aio.ServicerContext) -> str:
    peer = context.peer() or ""
    return peer.rsplit(":", 1)[0] if peer.count(":") > 1 else peer


class _Cache(Generic[T]):
    """Credentials read from SQL, trusted for ``ttl_s`` (a revocation takes effect within it). Only
    known credentials are cached, so the cache is bounded by what the operator issued."""

    def __init__(self, ttl_s: float, load: Callable[[str], T | None]) -> None:
        self._ttl_s = ttl_s
        self._load = load
        self._entries: dict[str, tuple[T, float]] = {}

    def fresh(self, ident: str) -> T | None:
        hit = self._entries.get(ident)
        return hit[0] if hit is not None and time.monotonic() - hit[1] < self._ttl_s else None

    async def load(self, ident: str) -> T | None:
        value = await asyncio.to_thread(self._load, ident)
        if value is None:
            self._entries.pop(ident, None)
        else:
            self._entries[ident] = (value, time.monotonic())
        return value


_DEFAULT_OWNER = JobSpec.model_fields["owner"].default


def check_drive(caller: Caller, job: ActiveJob) -> None:
    """Only the job's owner (or an admin) drives it; the job token is checked as well, by the registry."""
    caller.require("submit")
    if not caller.may_drive(job):
        raise PermissionDenied(f"job {job.job_id!r} belongs to another owner")


def check_read(caller: Caller, job: ActiveJob) -> None:
    if not caller.may_read(job):
        raise PermissionDenied(f"job {job.job_id!r} belongs to another owner (reading it needs the 'read' role)")


def owned_spec(spec: JobSpec, caller: Caller) -> JobSpec:
    """The owner of a job is its API key's: a spec naming no owner gets it, one naming another is refused."""
    if caller.open or spec.owner == caller.owner:
        return spec
    if spec.owner == _DEFAULT_OWNER:
        return spec.model_copy(update={"owner": caller.owner})
    raise PermissionDenied(f"owner: the spec names {spec.owner!r}, but the API key belongs to {caller.owner!r}")


class Guard:
    """Authenticates and rate-limits calls; the services ask it before they act."""

    def __init__(self, settings: Settings, identities: IdentityStore, redis: AnyRedis | None = None,
                 pipe: ScriptedPipe | None = None) -> None:
        """``redis`` (and its lean ``pipe``): where the rate limits' buckets are shared by every shard, when
        ``settings.shared_rate_limits``; None: in this process."""
        self.open = settings.auth == "open"
        self._identities = identities
        self._certificates = settings.tls_require_client_cert  # a client certificate's CN is then verified
        self._keys = _Cache(settings.auth_cache_s, identities.key)
        self._devices = _Cache(settings.auth_cache_s, identities.device)
        self._revoked = _Cache(settings.auth_cache_s, identities.client_revoked)  # certificate CNs: what the CA issued
        shared = redis if settings.shared_rate_limits else None

        def limiter(name: str, rate_per_s: float, burst: int) -> SharedRateLimiter:
            return SharedRateLimiter(shared, pipe, settings.key_prefix, name, rate_per_s, burst, settings.rate_buckets)

        self._key_rate = limiter("key", settings.key_rate_per_s, settings.key_burst)
        self._device_rate = limiter("device", settings.device_rate_per_s, settings.device_burst)
        failures_burst = max(1, int(settings.auth_failures_per_s * 4))
        self._failures = limiter("failures", settings.auth_failures_per_s, failures_burst)

    # ------------------------------------------------------------ job submitters

    async def job_caller(self, context: grpc.aio.ServicerContext, role: Role | None = None) -> Caller:
        """The caller of a job call, holding ``role`` when one is named."""
        if self.open:
            return OPEN
        header = _metadata(context, "authorization")
        if not header.lower().startswith(_BEARER):
            raise Unauthenticated("authorization: an API key is required ('authorization: Bearer <key>'; "
                                  "`propius keys create` makes one)")
        key = Secret.parse(header[len(_BEARER):].strip(), "pk")
        record = None if key is None else await self._lookup(self._keys, key.id, context)
        if key is None or record is None or record.revoked_at is not None or not key.matches(record.secret_hash):
            await self._failed(context)
            raise Unauthenticated("authorization: unknown or revoked API key")
        caller = Caller(actor=f"key:{record.key_id}:{record.owner}", owner=record.owner, roles=record.role_set)
        await _limit(self._key_rate, record.key_id, f"API key {record.key_id}")
        if role is not None:
            caller.require(role)
        return caller

    # ------------------------------------------------------------ devices

    async def device_caller(self, context: grpc.aio.ServicerContext, token: str = "") -> Caller:
        """The device making a client call: its credential (``token``, else the call's metadata), else the
        common name of its mutual-TLS certificate."""
        if self.open:
            return OPEN
        token = token or _metadata(context, DEVICE_HEADER)
        if token:
            credential = Secret.parse(token, "pd")
            record = None if credential is None else await self._lookup(self._devices, credential.id, context)
            if (credential is None or record is None or record.revoked_at is not None
                    or not credential.matches(record.secret_hash)):
                await self._failed(context)
                raise Unauthenticated(f"{DEVICE_HEADER}: unknown or revoked device credential")
            caller = Caller(actor=f"device:{record.device_id}:{record.client_id}", client_id=record.client_id)
        elif self._certificates and (name := _certificate_name(context)):
            if await self._lookup(self._revoked, name, context):
                raise Unauthenticated(f"client certificate: client id {name!r} is revoked (`propius devices list`)")
            caller = Caller(actor=f"cert:{name}", client_id=name)
        else:
            raise Unauthenticated(f"{DEVICE_HEADER}: a device credential is required (enrol with "
                                  "`propius-client --enroll-token ...`)")
        await _limit(self._device_rate, caller.client_id, f"device {caller.client_id!r}")
        return caller

    @staticmethod
    def require_client(caller: Caller, client_id: str) -> None:
        """A device acts only under the client id its credential is bound to."""
        if not caller.open and client_id != caller.client_id:
            raise PermissionDenied(f"client_id: {client_id!r} is not the client id this credential is bound to")

    # ------------------------------------------------------------ enrolment

    async def enrolment_token(self, context: grpc.aio.ServicerContext, text: str) -> Secret:
        """The enrolment token of an Enroll call, well-formed (whether it is known is :meth:`enroll`'s)."""
        if self.open:
            raise Conflict("this control plane runs in open mode: devices need no credential")
        token = Secret.parse(text, "pe")
        if token is None:
            raise Unauthenticated("enrolment_token: not an enrolment token (`propius devices token create`)")
        await self._check_failures(context)
        return token

    async def enroll(self, context: grpc.aio.ServicerContext, token: Secret, client_id: str) -> str:
        """A new device credential bound to ``client_id``: once per client id, one use of the token."""
        try:
            _, credential = await asyncio.to_thread(self._identities.enroll, token, client_id, time.time())
        except EnrolmentRefused as refusal:
            if refusal.taken:
                raise PermissionDenied(f"client_id: {refusal}") from None
            await self._failed(context)
            raise Unauthenticated(f"enrolment_token: {refusal}") from None
        return str(credential)

    # ------------------------------------------------------------ credentials looked up in SQL

    async def _lookup(self, cache: _Cache[T], ident: str, context: grpc.aio.ServicerContext) -> T | None:
        """A credential's row: from the cache, else from SQL unless the caller's address keeps presenting
        unknown credentials (each costs a SQL read)."""
        if (hit := cache.fresh(ident)) is not None:
            return hit
        await self._check_failures(context)
        return await cache.load(ident)

    async def _check_failures(self, context: grpc.aio.ServicerContext) -> None:
        if wait_s := await self._failures.wait_s(_peer_host(context)):
            raise ResourceExhausted(f"too many unknown credentials from this address; {retry_after_text(wait_s)}")

    async def _failed(self, context: grpc.aio.ServicerContext) -> None:
        await self._failures.take(_peer_host(context))


async def _limit(limiter: SharedRateLimiter, key: str, who: str) -> None:
    if wait_s := await limiter.take(key):
        raise ResourceExhausted(f"rate limit of {who} ({limiter.rate_per_s:g} calls/s) reached; "
                                f"{retry_after_text(wait_s)}")
