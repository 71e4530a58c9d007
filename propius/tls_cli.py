"""TLS on the command line: ``propius certs init`` and the client options every command shares.

``tls_options`` adds ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--insecure`` to a command once, here,
and hands it the result as ``security: ChannelSecurity``; given options replace the ``PROPIUS_TLS_*``
environment, none given reads it (see :meth:`propius.config.ChannelSecurity.given`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console

from propius.certs import DEFAULT_HOSTS, CertsError, init_certs
from propius.config import ChannelSecurity

__all__ = ["app", "tls_options"]

F = TypeVar("F", bound=Callable[..., Any])
_PEM = {"exists": True, "dir_okay": False, "rich_help_panel": "TLS"}  # a missing file is a usage error

_OPTIONS = (
    ("tls_ca", Annotated[Path | None, typer.Option(**_PEM, help="CA the control plane's certificate must chain to; "
                                                               "default: the system's roots (env PROPIUS_TLS_CA)")],
     None),
    ("tls_cert", Annotated[Path | None, typer.Option(**_PEM, help="client certificate, for a control plane that "
                                                                 "requires one (env PROPIUS_TLS_CERT)")], None),
    ("tls_key", Annotated[Path | None, typer.Option(**_PEM, help="its private key (env PROPIUS_TLS_KEY)")], None),
    ("insecure", Annotated[bool, typer.Option("--insecure", rich_help_panel="TLS",
                                              help="plaintext, no TLS (env PROPIUS_INSECURE=1)")], False),
)


def tls_options(command: F) -> F:
    """Give ``command`` (which takes ``security: ChannelSecurity``) the shared TLS options instead."""
    signature = inspect.signature(command, eval_str=True)  # typer reads a set __signature__ as it is
    kept = [p for p in signature.parameters.values() if p.name != "security"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
             for name, annotation, default in _OPTIONS]

    @functools.wraps(command)
    def wrapper(*args: Any, tls_ca: Path | None = None, tls_cert: Path | None = None, tls_key: Path | None = None,
                insecure: bool = False, **kwargs: Any) -> Any:
        try:
            security = ChannelSecurity.given(tls_ca, tls_cert, tls_key, insecure)
        except ValidationError as error:
            raise typer.BadParameter(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
        return command(*args, security=security, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in kept + added}
    return wrapper  # type: ignore[return-value]


app = typer.Typer(help="Certificates for TLS between the control plane and its clients.", no_args_is_help=True)
console = Console()


@app.command("init")
def init(
    directory: Annotated[Path, typer.Option("--dir", help="where the certificates go (keys: mode 0600)")],
    hosts: Annotated[list[str] | None, typer.Option(
        "--hosts", help=f"names and addresses clients dial, in the server certificate (repeatable; default: "
                        f"{', '.join(DEFAULT_HOSTS)})")] = None,
    clients: Annotated[list[str] | None, typer.Option(
        "--clients", help="client certificates: a count N (client-0..client-N-1) or names (repeatable); "
                          "default: 1")] = None,
    days: Annotated[int, typer.Option(min=1, help="validity of the server and client certificates")] = 825,
    force: Annotated[bool, typer.Option(help="replace every file, the CA included (clients must get the new "
                                             "CA and certificates)")] = False,
) -> None:
    """A CA, a server certificate and client certificates; what exists is kept, so a rerun adds only new names."""
    try:
        report = init_certs(directory, hosts or DEFAULT_HOSTS, clients or ["1"], days=days, force=force)
    except CertsError as error:
        raise typer.BadParameter(str(error)) from None
    for path in report.written:
        console.print(f"wrote {path}", soft_wrap=True)
    if report.kept:
        console.print(f"kept {len(report.kept)} existing files in {directory} (--force replaces them)", soft_wrap=True)
