"""``propius simulate``: one trace-driven run, printed as a table, written as JSON and a PNG.

Mount it in ``propius/cli.py`` with::

    from propius.simulator.cli import simulate_command
    app.command("simulate")(simulate_command)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from policies import PolicyOptionError, UnknownPolicyError, parse_options
from policies.registry import PROFILE_PREFIX
from propius.simulator.availability import AvailabilityModel
from propius.simulator.engine import Mode, SimConfig
from propius.simulator.population import MAX_CLIENTS, MAX_DAYS, PopulationModel, make_population
from propius.simulator.run import shortfalls, simulate
from propius.simulator.workload import builtin_workloads, load_workload
from propius.specs import SpecError

__all__ = ["app", "output_stem", "policy_options", "simulate_command"]

console = Console()
_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")


def policy_options(pairs: list[str]) -> dict[str, object]:
    """``--option key=value`` items as policy options (shared with ``propius up --policy-option``)."""
    try:
        return parse_options(pairs)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


DEFAULT_DAYS = 4


def output_stem(workload: str, policy: str, mode: str, clients: int, seed: int, options: Mapping[str, object],
                days: int, availability: str) -> str:
    """The output files' name: every argument that changes the result is in it, so runs never overwrite each
    other (the defaults, 4 days and diurnal availability, are left out)."""
    parts = [workload, policy, mode, str(clients), f"s{seed}"]
    parts += [f"{key}={json.dumps(value, sort_keys=True, separators=(',', ':'))}" for key, value in
              sorted(options.items())]
    parts += [f"{days}d"] if days != DEFAULT_DAYS else []
    parts += [availability] if availability != "diurnal" else []
    return _UNSAFE.sub("_", "-".join(parts).replace('"', ''))


def _cell(value: object) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.3f}" if isinstance(value, float) else str(value)


def simulate_command(
    workload: Annotated[str, typer.Argument(help="workload YAML, or a packaged one: "
                                                 + ", ".join(builtin_workloads()))],
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = "propius",
    policy_profile: Annotated[Path | None, typer.Option(
        help="a policy profile YAML (docs/policies.md); replaces --policy, --option overrides its plug-ins")] = None,
    clients: Annotated[int | None, typer.Option(
        min=1, max=MAX_CLIENTS, help="client count; default: the workload's first")] = None,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    mode: Annotated[str, typer.Option(help="central | static | client-random")] = "central",
    option: Annotated[list[str] | None, typer.Option(help="policy option key=value (repeatable)")] = None,
    days: Annotated[int, typer.Option(
        min=1, max=MAX_DAYS, help="simulated days of client traces (the horizon)")] = DEFAULT_DAYS,
    availability: Annotated[str, typer.Option(
        help="diurnal: seeded on/off sessions; always: every client online throughout (the utilization "
             "experiment's setting)")] = "diurnal",
    out: Annotated[Path, typer.Option(help="directory for the JSON and PNG, named after the run's arguments")] = Path(
        "simulation-results"),
) -> None:
    """Simulate a workload on seeded trace-driven clients with one policy; deterministic for a seed."""
    if mode not in ("central", "static", "client-random"):
        raise typer.BadParameter(f"unknown mode {mode!r}")
    if availability not in ("diurnal", "always"):
        raise typer.BadParameter(f"unknown availability {availability!r}")
    options = policy_options(option or [])
    if policy_profile is not None:
        policy = f"{PROFILE_PREFIX}{policy_profile}"
    try:
        spec = load_workload(workload)
    except (SpecError, OSError) as error:
        console.print(f"[red]invalid workload[/] {workload}: {error}", highlight=False)
        raise typer.Exit(2) from None
    n = spec.client_counts[0] if clients is None else clients
    mode_: Mode = mode  # type: ignore[assignment]
    model = PopulationModel(availability=AvailabilityModel(mode=availability), days=days)  # type: ignore[arg-type]
    population = make_population(n, seed, model)
    for shortfall in shortfalls(spec, population):
        console.print(f"[yellow]warning:[/] {shortfall}", highlight=False)
    try:
        metrics, _ = simulate(spec, policy, n, seed, config=SimConfig(mode=mode_, seed=seed), options=options,
                              population=population)
    except (UnknownPolicyError, PolicyOptionError) as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    out.mkdir(parents=True, exist_ok=True)
    label = policy if policy_profile is None else f"profile-{policy_profile.stem}"
    stem = output_stem(spec.name, label, mode, n, seed, options, days, availability)
    (out / f"{stem}.json").write_text(json.dumps(metrics.to_dict(), indent=2, allow_nan=False))
    try:
        from propius.simulator.plots import plot_run  # matplotlib: the `sim` extra, not the core
    except ImportError:
        console.print("matplotlib is not installed (pip install 'propius[sim]'): no PNG plot")
    else:
        plot_run(metrics, out / f"{stem}.png")
    table = Table("metric", "value")
    for key, value in metrics.to_dict().items():
        if key != "jobs":
            table.add_row(key, _cell(value))
    console.print(table)
    if metrics.unfinished:
        covered = f"the JCTs cover the {metrics.finished} that did" if metrics.finished else "there is no JCT"
        console.print(f"[yellow]warning:[/] {metrics.unfinished} of {len(metrics.jobs)} jobs did not finish within "
                      f"the {days}-day horizon ({', '.join(metrics.unfinished_jobs)}); {covered}", highlight=False)
    console.print(f"wrote {out / stem}.json and .png", highlight=False)


app = typer.Typer(help="Trace-driven simulation of Propius sharing policies.")
app.command("simulate")(simulate_command)

if __name__ == "__main__":
    app()
