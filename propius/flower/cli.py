"""``propius flower``: run Flower apps on Propius (mounted on the ``propius`` command)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer

from propius.config import ChannelSecurity
from propius.tls_cli import tls_options

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)


@app.callback()
def flower() -> None:
    """Run Flower apps on Propius."""


@app.command()
@tls_options
def run(
    app_dir: Annotated[Path, typer.Argument(help="Flower app directory (with a pyproject.toml for flwr)")],
    run_config: Annotated[list[str] | None, typer.Option(help="overrides, 'k=v k2=v2' (repeatable) or a .toml")] = None,
    server: Annotated[str, typer.Option(help="control-plane address host:port")] = "127.0.0.1:50051",
    demand: Annotated[int | None, typer.Option(min=1, help="nodes per round")] = None,
    over_selection: Annotated[float | None, typer.Option(min=1.0, help="bind up to demand x this")] = None,
    partitions: Annotated[int | None, typer.Option(min=1, help="num-partitions in node_config")] = None,
    requirements: Annotated[str | None, typer.Option(help='JSON, e.g. \'{"public": {"cpu_f": {"min": 7}}}\'')] = None,
    priority: Annotated[float | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option(help="job name (default flower-<project>)")] = None,
    verbose: Annotated[bool, typer.Option(help="log every round of the run")] = False,
    *,
    security: ChannelSecurity,
) -> None:
    """Host the app's ServerApp here; its ClientApp runs on Propius client daemons."""
    try:
        from flwr.common.config import parse_config_args
    except ModuleNotFoundError:
        raise typer.BadParameter("Flower is not installed: pip install 'propius[flower]'") from None

    from propius.flower.host import run_app
    from propius.flower.project import RunOptions

    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("propius.flower").setLevel(logging.DEBUG)
    try:
        wanted = json.loads(requirements) if requirements else None
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"not JSON: {error}", param_hint="--requirements") from None
    options = RunOptions(demand=demand, over_selection=over_selection, partitions=partitions, priority=priority,
                         requirements=wanted, name=name)
    run_app(app_dir, server, parse_config_args(run_config), options, security=security)
