"""``propius keys``, ``propius devices`` and ``propius audit``: the operator's identity tools.

They open the control plane's database directly (``--database-url``, or SQLite in ``--data-dir`` as
``propius up`` uses it), as an operator's tool rather than over an RPC: whoever can write that database
already controls the control plane, and no admin RPC is then exposed to the network. A secret (API key,
enrolment token) is printed once, at creation; only its hash is stored. See docs/security.md.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import grpc
import typer
from rich.console import Console
from rich.table import Table

from control_plane.identity_store import ROLES, IdentityStore
from propius.config import Settings
from propius.sdk import api_key_metadata

__all__ = ["audit_app", "devices_app", "keys_app", "with_api_key", "with_metadata"]

console = Console()
keys_app = typer.Typer(help="Job-submitter API keys (roles: submit, read, admin).", no_args_is_help=True)
devices_app = typer.Typer(help="Device enrolment tokens and enrolled devices.", no_args_is_help=True)
token_app = typer.Typer(help="Enrolment tokens: a device trades one for its credential.", no_args_is_help=True)
devices_app.add_typer(token_app, name="token")
audit_app = typer.Typer(help="The audit log: who made each state-changing call.", invoke_without_command=True)

DatabaseUrl = Annotated[str, typer.Option(envvar="PROPIUS_DATABASE_URL", help="the control plane's database; "
                                          "empty: SQLite in --data-dir")]
DataDir = Annotated[Path, typer.Option(envvar="PROPIUS_DATA_DIR", help="the control plane's --data-dir")]
SecretFile = Annotated[Path | None, typer.Option(
    "--out", dir_okay=False, help="write the secret alone to this file (mode 0600) instead of printing it; a file "
    "already there is kept and nothing is created, so a bootstrap step may run at every start")]


@contextlib.contextmanager
def _identities(database_url: str, data_dir: Path) -> Iterator[IdentityStore]:
    store = IdentityStore.open(Settings(database_url=database_url, data_dir=data_dir).resolved_database_url())
    try:
        yield store
    finally:
        store.close()


def _kept(out: Path | None) -> bool:
    """Whether ``--out`` names a file already there (kept: the secret in it is the one in use)."""
    if out is not None and out.exists():
        console.print(f"{out} exists: kept, nothing created")
        return True
    return False


def _write_secret(out: Path, secret: str) -> None:
    """``secret`` alone in a new file only this user reads."""
    out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with os.fdopen(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(secret + "\n")


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------- keys


@keys_app.command("create")
def keys_create(
    owner: Annotated[str, typer.Option(help="whose jobs the key submits and drives")],
    role: Annotated[list[str], typer.Option(help=f"one of {', '.join(ROLES)} (repeatable)")],
    database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data"), out: SecretFile = None,
) -> None:
    """Create an API key; it is printed once, or written to --out (callers pass it as $PROPIUS_API_KEY, or its
    file as $PROPIUS_API_KEY_FILE)."""
    if unknown := sorted(set(role) - set(ROLES)):
        raise typer.BadParameter(f"{', '.join(unknown)}: roles are {', '.join(ROLES)}", param_hint="--role")
    if not 1 <= len(owner) <= 128 or not owner.isprintable():
        raise typer.BadParameter("1 to 128 printable characters", param_hint="--owner")
    if _kept(out):
        return
    with _identities(database_url, data_dir) as identities:
        record, key = identities.create_key(owner, tuple(role), time.time())  # type: ignore[arg-type]
    if out is not None:
        _write_secret(out, str(key))
        console.print(f"key {record.key_id} for {owner} ({record.roles}) written to {out}")
        return
    console.print(f"key {record.key_id} for {owner} ({record.roles}); shown once, keep it secret:")
    console.print(str(key), markup=False, soft_wrap=True)


@keys_app.command("list")
def keys_list(database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data")) -> None:
    """List API keys (never their secrets)."""
    with _identities(database_url, data_dir) as identities:
        keys = identities.keys()
    table = Table("key id", "owner", "roles", "created (UTC)", "revoked (UTC)")
    for key in keys:
        table.add_row(key.key_id, key.owner, key.roles, _when(key.created_at), _when(key.revoked_at))
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: str, database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data")) -> None:
    """Revoke an API key; control planes refuse it within their auth_cache_s."""
    with _identities(database_url, data_dir) as identities:
        if not identities.revoke_key(key_id, time.time()):
            raise typer.BadParameter(f"no live key {key_id!r} (`propius keys list`)", param_hint="KEY_ID")
    console.print(f"key {key_id} revoked")


# ---------------------------------------------------------------- devices


@token_app.command("create")
def token_create(
    uses: Annotated[int, typer.Option(min=1, help="devices that may enrol with it")] = 1,
    ttl_s: Annotated[float, typer.Option(min=1, help="it expires after this many seconds")] = 86400.0,
    note: Annotated[str, typer.Option(help="what it is for (listed, never secret)")] = "",
    database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data"), out: SecretFile = None,
) -> None:
    """Create an enrolment token; printed once (`propius-client --enroll-token ...`), or written to --out
    (`propius-client --enroll-token-file ...`)."""
    if _kept(out):
        return
    with _identities(database_url, data_dir) as identities:
        record, token = identities.create_enrolment(uses, ttl_s, time.time(), note)
    what = f"enrolment token {record.token_id}: {uses} use(s), expires {_when(record.expires_at)} UTC"
    if out is not None:
        _write_secret(out, str(token))
        console.print(f"{what}; written to {out}")
        return
    console.print(f"{what}; shown once, keep it secret:")
    console.print(str(token), markup=False, soft_wrap=True)


@token_app.command("list")
def token_list(database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data")) -> None:
    """List enrolment tokens (never their secrets)."""
    with _identities(database_url, data_dir) as identities:
        tokens = identities.enrolments()
    table = Table("token id", "uses left", "expires (UTC)", "note")
    for token in tokens:
        table.add_row(token.token_id, str(token.uses_left), _when(token.expires_at), token.note)
    console.print(table)


@devices_app.command("list")
def devices_list(database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data")) -> None:
    """List enrolled devices and the client id each is bound to."""
    with _identities(database_url, data_dir) as identities:
        devices = identities.devices()
    table = Table("device id", "client id", "enrolled (UTC)", "token", "revoked (UTC)")
    for device in devices:
        table.add_row(device.device_id, device.client_id, _when(device.enrolled_at), device.token_id,
                      _when(device.revoked_at))
    console.print(table)


@devices_app.command("revoke")
def devices_revoke(client_id: str, database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data")) -> None:
    """Revoke a client id: the credential bound to it, or the id itself where a mutual-TLS certificate names
    it; the id stays bound, so no one can enrol under it or use a certificate naming it."""
    with _identities(database_url, data_dir) as identities:
        if not identities.revoke_device(client_id, time.time()):
            raise typer.BadParameter(f"{client_id!r} is revoked already (`propius devices list`)",
                                     param_hint="CLIENT_ID")
    console.print(f"client id {client_id} revoked")


# ---------------------------------------------------------------- audit


@audit_app.callback()
def audit(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="newest rows shown")] = 50,
    target: Annotated[str | None, typer.Option(help="only calls on this job or client id")] = None,
    database_url: DatabaseUrl = "", data_dir: DataDir = Path("propius-data"),
) -> None:
    """Show the newest audit rows, oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    with _identities(database_url, data_dir) as identities:
        rows = identities.audit(limit, target)
    table = Table("at (UTC)", "who", "method", "target", "outcome")
    for row in rows:
        table.add_row(_when(row.at), row.actor, row.method, row.target, row.outcome)
    console.print(table)


# ---------------------------------------------------------------- the CLI's calls carry the API key


class _Metadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``metadata`` to every call (after the call's own, which wins where a server reads the first)."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _details(self, details: Any) -> Any:
        return details._replace(metadata=(*(details.metadata or ()), *self._metadata))

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(client_call_details), request_iterator)


def with_metadata(channel: grpc.Channel, metadata: tuple[tuple[str, str], ...]) -> grpc.Channel:
    """``channel`` whose calls carry ``metadata`` too (credentials), however the channel was built."""
    return grpc.intercept_channel(channel, _Metadata(metadata)) if metadata else channel


def with_api_key(channel: grpc.Channel) -> grpc.Channel:
    """``channel`` whose calls present ``$PROPIUS_API_KEY`` (unchanged when it is not set)."""
    return with_metadata(channel, api_key_metadata())
