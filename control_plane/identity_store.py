"""Durable identities: job-submitter API keys, device enrolment tokens, device credentials, the audit log.

Every secret is a 256-bit random string shown once at creation; only its sha256 is stored. A slow hash
(scrypt) buys nothing against a guess at 2^256, and a fast one keeps a credential check off the hot path.
Secrets read ``<prefix>_<id>_<secret>``: the id finds the row, the secret is compared in constant time.

The tables live in the control plane's database (SQLite or PostgreSQL) next to :mod:`control_plane.store`'s,
in their own metadata so an operator tool (``propius keys``) can open them without the rest.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar, get_args

from sqlalchemy import Engine, Index, Text, create_engine, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from control_plane.store import create_tables

__all__ = [
    "ROLES",
    "ApiKeyRecord",
    "AuditRecord",
    "DeviceRecord",
    "EnrolmentRecord",
    "EnrolmentRefused",
    "IdentityStore",
    "Role",
    "Secret",
    "secret_hash",
]

Role = Literal["submit", "read", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Secret:
    """A credential as the holder sees it: ``<prefix>_<id>_<secret>``."""

    prefix: str
    id: str
    secret: str

    @classmethod
    def new(cls, prefix: str) -> Secret:
        return cls(prefix, secrets.token_hex(6), secrets.token_urlsafe(32))

    @classmethod
    def parse(cls, text: str, prefix: str) -> Secret | None:
        """The credential, or None when ``text`` is not one of this kind (never an exception)."""
        head, sep, rest = text.partition("_")
        ident, sep2, secret = rest.partition("_")
        if head != prefix or not sep or not sep2 or len(ident) != 12 or not 20 <= len(secret) <= 100:
            return None
        return cls(prefix, ident, secret)

    def __str__(self) -> str:
        return f"{self.prefix}_{self.id}_{self.secret}"

    def matches(self, stored_hash: str) -> bool:
        return secrets.compare_digest(secret_hash(self.secret), stored_hash)


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    owner: str
    roles: str  # comma-separated Role values
    secret_hash: str
    created_at: float
    revoked_at: float | None = None

    @property
    def role_set(self) -> frozenset[str]:
        return frozenset(self.roles.split(","))


@dataclass(frozen=True)
class EnrolmentRecord:
    token_id: str
    secret_hash: str
    uses_left: int
    expires_at: float
    created_at: float
    note: str = ""


@dataclass(frozen=True)
class DeviceRecord:
    """A device credential: ``client_id`` is bound to it, so only its holder checks in under that id."""

    device_id: str
    client_id: str
    secret_hash: str
    enrolled_at: float
    token_id: str  # the enrolment token it came from
    revoked_at: float | None = None


@dataclass(frozen=True)
class AuditRecord:
    at: float
    actor: str  # "key:<id>:<owner>", "device:<id>:<client id>", "cert:<CN>" or "open"
    method: str
    target: str  # the job or client id acted on ("" when none)
    outcome: str  # the gRPC status name: OK, PERMISSION_DENIED, ...
    id: int | None = None


# ---------------------------------------------------------------- tables


class _Base(DeclarativeBase):
    type_annotation_map = {str: Text}


class _ApiKey(_Base):
    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(primary_key=True)
    owner: Mapped[str]
    roles: Mapped[str]
    secret_hash: Mapped[str]
    created_at: Mapped[float]
    revoked_at: Mapped[float | None]


class _Enrolment(_Base):
    __tablename__ = "enrolment_tokens"

    token_id: Mapped[str] = mapped_column(primary_key=True)
    secret_hash: Mapped[str]
    uses_left: Mapped[int]
    expires_at: Mapped[float]
    created_at: Mapped[float]
    note: Mapped[str]


class _Device(_Base):
    __tablename__ = "device_credentials"

    device_id: Mapped[str] = mapped_column(primary_key=True)
    client_id: Mapped[str] = mapped_column(unique=True)  # one credential per client id, ever
    secret_hash: Mapped[str]
    enrolled_at: Mapped[float]
    token_id: Mapped[str]
    revoked_at: Mapped[float | None]


class _Audit(_Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_at", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    at: Mapped[float]
    actor: Mapped[str]
    method: Mapped[str]
    target: Mapped[str]
    outcome: Mapped[str]


_R = TypeVar("_R")


def _record(cls: type[_R], row: Any) -> _R:
    return cls(**{f.name: getattr(row, f.name) for f in fields(cls)})  # type: ignore[arg-type]


class EnrolmentRefused(Exception):
    """The enrolment token is unknown, used up or expired, or (``taken``) the client id is already enrolled."""

    def __init__(self, message: str, *, taken: bool = False) -> None:
        super().__init__(message)
        self.taken = taken


class IdentityStore:
    """Keys, enrolment tokens, device credentials and audit rows; synchronous (callers use ``to_thread``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._session = sessionmaker(engine, expire_on_commit=False)
        create_tables(engine, _Base.metadata)

    @classmethod
    def open(cls, url: str) -> IdentityStore:
        """A store of its own (an operator tool); a control plane shares its :class:`Store`'s engine."""
        return cls(create_engine(url, pool_pre_ping=True))

    def close(self) -> None:
        self._engine.dispose()

    # ------------------------------------------------------------ API keys

    def create_key(self, owner: str, roles: tuple[Role, ...], now: float) -> tuple[ApiKeyRecord, Secret]:
        key = Secret.new("pk")
        record = ApiKeyRecord(key.id, owner, ",".join(sorted(set(roles))), secret_hash(key.secret), now)
        with self._session.begin() as session:
            session.execute(insert(_ApiKey), [record.__dict__])
        return record, key

    def key(self, key_id: str) -> ApiKeyRecord | None:
        with self._session() as session:
            row = session.get(_ApiKey, key_id)
            return None if row is None else _record(ApiKeyRecord, row)

    def keys(self) -> list[ApiKeyRecord]:
        with self._session() as session:
            return [_record(ApiKeyRecord, row) for row in session.scalars(select(_ApiKey).order_by(_ApiKey.created_at))]

    def revoke_key(self, key_id: str, now: float) -> bool:
        with self._session.begin() as session:
            result = session.execute(update(_ApiKey).where(_ApiKey.key_id == key_id, _ApiKey.revoked_at.is_(None))
                                     .values(revoked_at=now))
            return result.rowcount == 1

    # ------------------------------------------------------------ device enrolment

    def create_enrolment(self, uses: int, ttl_s: float, now: float, note: str = "") -> tuple[EnrolmentRecord, Secret]:
        token = Secret.new("pe")
        record = EnrolmentRecord(token.id, secret_hash(token.secret), uses, now + ttl_s, now, note)
        with self._session.begin() as session:
            session.execute(insert(_Enrolment), [record.__dict__])
        return record, token

    def enrolments(self) -> list[EnrolmentRecord]:
        with self._session() as session:
            rows = session.scalars(select(_Enrolment).order_by(_Enrolment.created_at))
            return [_record(EnrolmentRecord, row) for row in rows]

    def enroll(self, token: Secret, client_id: str, now: float) -> tuple[DeviceRecord, Secret]:
        """Spend one use of ``token`` and bind ``client_id`` to a new device credential, in one transaction:
        a refused enrolment (bad token, id already enrolled) spends nothing and writes nothing."""
        credential = Secret.new("pd")
        record = DeviceRecord(credential.id, client_id, secret_hash(credential.secret), now, token.id)
        try:
            with self._session.begin() as session:
                row = session.get(_Enrolment, token.id)
                if row is None or not token.matches(row.secret_hash):
                    raise EnrolmentRefused("enrolment token is not valid")
                spent = session.execute(
                    update(_Enrolment).where(_Enrolment.token_id == token.id, _Enrolment.uses_left > 0,
                                             _Enrolment.expires_at > now)
                    .values(uses_left=_Enrolment.uses_left - 1))
                if spent.rowcount != 1:
                    raise EnrolmentRefused("enrolment token is used up or expired")
                session.execute(insert(_Device), [record.__dict__])
        except IntegrityError:
            raise EnrolmentRefused(f"client id {client_id!r} is already enrolled", taken=True) from None
        return record, credential

    def device(self, device_id: str) -> DeviceRecord | None:
        with self._session() as session:
            row = session.get(_Device, device_id)
            return None if row is None else _record(DeviceRecord, row)

    def devices(self) -> list[DeviceRecord]:
        with self._session() as session:
            rows = session.scalars(select(_Device).order_by(_Device.enrolled_at))
            return [_record(DeviceRecord, row) for row in rows]

    def revoke_device(self, client_id: str, now: float) -> bool:
        """Revoke ``client_id``: its enrolled credential, or, where it has none, the id itself: a revoked row
        with no usable secret binds it, so a mutual-TLS certificate naming it is refused and no one can enrol
        under it. False when it was revoked already."""
        for _ in range(2):  # an enrolment of the same id may insert between the two statements: look again
            try:
                with self._session.begin() as session:
                    result = session.execute(update(_Device).where(_Device.client_id == client_id,
                                                                   _Device.revoked_at.is_(None))
                                             .values(revoked_at=now))
                    if result.rowcount == 1:
                        return True
                    if session.scalar(select(_Device.device_id).where(_Device.client_id == client_id)) is not None:
                        return False
                    session.execute(insert(_Device), [{"device_id": Secret.new("pd").id, "client_id": client_id,
                                                       "secret_hash": "", "enrolled_at": now, "token_id": "",
                                                       "revoked_at": now}])
                    return True
            except IntegrityError:
                continue
        return False

    def client_revoked(self, client_id: str) -> bool:
        """Whether ``client_id`` is revoked (its credential, or the id itself: :meth:`revoke_device`)."""
        with self._session() as session:
            return session.scalar(select(_Device.revoked_at).where(_Device.client_id == client_id)) is not None

    # ------------------------------------------------------------ audit log

    def record_audit(self, rows: list[AuditRecord], max_rows: int, older_than: float) -> None:
        """Append ``rows``, then drop rows older than ``older_than`` and the oldest beyond ``max_rows``."""
        with self._session.begin() as session:
            if rows:
                session.execute(insert(_Audit), [{k: v for k, v in row.__dict__.items() if k != "id"} for row in rows])
            session.execute(delete(_Audit).where(_Audit.at < older_than))
            newest = session.scalar(select(func.max(_Audit.id)))
            if newest is not None:
                session.execute(delete(_Audit).where(_Audit.id <= newest - max_rows))

    def audit(self, limit: int = 50, target: str | None = None) -> list[AuditRecord]:
        """The newest ``limit`` rows (about ``target`` when given), oldest first."""
        query = select(_Audit).order_by(_Audit.id.desc()).limit(limit)
        if target is not None:
            query = query.where(_Audit.target == target)
        with self._session() as session:
            return [_record(AuditRecord, row) for row in reversed(list(session.scalars(query)))]
