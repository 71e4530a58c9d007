"""``propius trace``: export a job as a CCL-Bench data point, compute its metrics, validate a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from propius.trace.check import check_data_point
from propius.trace.datapoint import load_data_point
from propius.trace.metrics import compute_metrics

__all__ = ["app"]

app = typer.Typer(help="CCL-Bench data points: export, metrics, check.", no_args_is_help=True)
console = Console()


def _store_url(database_url: str, data_dir: Path) -> str:
    from propius.trace.export import read_only_sqlite_url

    if database_url:
        return database_url
    database = data_dir / "propius.db"
    if not database.is_file():
        console.print(f"[red]no store at {database}[/] (give --data-dir or --database-url)")
        raise typer.Exit(2)
    return read_only_sqlite_url(database)


@app.command()
def export(
    job_id: str,
    out_dir: Path,
    database_url: Annotated[str, typer.Option(help="SQLAlchemy URL of the store; default: SQLite in --data-dir")] = "",
    data_dir: Annotated[Path, typer.Option(help="the control plane's data dir (propius.db, read-only)")] = Path(
        "propius-data"),
    contributor: str = "propius",
    contact: str = "",
    launch_command: Annotated[str | None, typer.Option(help="run.sh command; default: propius submit --wait")] = None,
    policy: Annotated[str | None, typer.Option(
        help="the sharing policy for the card; default: the one the control plane recorded for the job")] = None,
) -> None:
    """Write job JOB_ID's recorded trace as a data point under OUT_DIR."""
    from control_plane.store import Store
    from propius.trace.export import NoTraceError, export_job

    store = Store(_store_url(database_url, data_dir))
    try:
        folder = export_job(store, job_id, out_dir, contributor=contributor, contact=contact,
                            launch_command=launch_command, policy=policy)
    except (KeyError, NoTraceError) as error:
        console.print(f"[red]cannot export[/]: {error.args[0] if error.args else error}")
        raise typer.Exit(1) from None
    finally:
        store.close()
    console.print(f"data point written: {folder}")


def _format(value: float | int | None, scale: float = 1.0, unit: str = "") -> str:
    return "n/a" if value is None else f"{value * scale:.4g}{unit}"


@app.command()
def metrics(
    folder: Path,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """FOLDER's metrics: three as CCL-Bench's tools compute them, two of Propius' own (docs/ccl-bench.md)."""
    try:
        result = compute_metrics(load_data_point(folder))
    except (OSError, ValueError) as error:
        console.print(f"[red]cannot read {folder}[/]: {error}")
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps({"data_point": folder.name, **result.as_dict()}, indent=2))
        return
    table = Table("metric", "value", title=f"{folder.name}: {result.ranks} ranks, "
                                           f"{result.steps_measured} of {result.steps} steps measured")
    table.add_row("avg_step_time (CCL-Bench)", _format(result.avg_step_time_s, 1.0, " s"))
    table.add_row("communication_fraction (CCL-Bench)", _format(result.communication_fraction, 100.0, " %"))
    table.add_row("compute_comm_overlap (CCL-Bench)", _format(result.compute_comm_overlap, 100.0, " %"))
    table.add_row("worker finish lag (Propius: last - median)", _format(result.worker_finish_lag_s, 1.0, " s"))
    table.add_row("worker compute imbalance (Propius: max/mean - 1)", _format(result.worker_compute_imbalance))
    console.print(table)


@app.command()
def check(folder: Path) -> None:
    """Report every deviation of FOLDER from the CCL-Bench format; exits 1 when there is one."""
    problems = check_data_point(folder)
    for problem in problems:
        console.print(f"[red]✗[/] {problem}", highlight=False, soft_wrap=True)
    if problems:
        console.print(f"{folder.name}: {len(problems)} problem(s)")
        raise typer.Exit(1)
    console.print(f"[green]✓[/] {folder.name}: a valid CCL-Bench data point")
