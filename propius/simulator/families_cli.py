"""``propius workload generate``: draw workload files from a family (:mod:`propius.simulator.families`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from propius.simulator.families import STRUCTURES, WorkloadFamily, generate

__all__ = ["app"]

app = typer.Typer(help="Workload files for the simulator.", no_args_is_help=True)


def _range(text: str | None, name: str) -> tuple[float, float] | None:
    if text is None:
        return None
    low, _, high = text.partition("-")
    try:
        return float(low), float(high or low)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give LOW-HIGH, e.g. 5-60", param_hint=f"--{name}") from None


@app.command("generate")
def generate_command(
    out: Annotated[Path, typer.Argument(help="folder for the workload files")],
    seeds: Annotated[list[int], typer.Option("--seed", min=0, help="family seed (repeatable); one file each")] = [0],  # noqa: B006
    structure: Annotated[str, typer.Option(help=f"eligibility classes: {', '.join(STRUCTURES)} or any")] = "any",
    arrival: Annotated[str, typer.Option(help="batch, poisson, bursty or any")] = "any",
    availability: Annotated[str, typer.Option(help="diurnal or always (a run setting, recorded in the file)")]
    = "diurnal",
    jobs: Annotated[str | None, typer.Option(help="LOW-HIGH jobs per workload [5-60]")] = None,
    demand: Annotated[str | None, typer.Option(help="LOW-HIGH results per round [5-1000]")] = None,
    rounds: Annotated[str | None, typer.Option(help="LOW-HIGH rounds per job [10-500]")] = None,
    clients: Annotated[str | None, typer.Option(help="LOW-HIGH population [2000-50000]")] = None,
    schedule_timeout: Annotated[str | None, typer.Option(help="LOW-HIGH seconds a round may take to bind [120]")]
    = None,
    execution_timeout: Annotated[str | None, typer.Option(help="LOW-HIGH seconds a task may take [180]")] = None,
) -> None:
    """Draw one workload per seed from a family of workloads; each file is an ordinary workload file
    for ``propius simulate``. The same options and seed always give the same file."""
    fields: dict[str, object] = {"structure": structure, "arrival": arrival, "availability": availability}
    for name, text in (("jobs", jobs), ("demand", demand), ("rounds", rounds), ("clients", clients)):
        if (bounds := _range(text, name)) is not None:
            fields[name] = (int(bounds[0]), int(bounds[1]))
    for name, text in (("schedule_timeout_s", schedule_timeout), ("execution_timeout_s", execution_timeout)):
        if (bounds := _range(text, name.removesuffix("_s").replace("_", "-"))) is not None:
            fields[name] = bounds
    try:
        family = WorkloadFamily.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = str(first["loc"][0]) if first["loc"] else ""
        message = first["msg"].removeprefix("Value error, ")
        raise typer.BadParameter(f"{where}: {message}" if where else message) from None
    out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        drawn = generate(family, seed)
        path = out / f"{drawn.workload.name}.yaml"
        path.write_text(drawn.to_yaml())
        typer.echo(f"{path}: {len(drawn.workload.jobs)} jobs, {drawn.structure} classes, {drawn.arrival} arrivals, "
                   f"{drawn.workload.clients:,} clients ({drawn.availability})")
