"""``propius simulate``: one trace-driven run, printed as a table, written as JSON and a PNG.

Mount it in ``propius/cli.py`` with::

    from propius.simulator.cli import simulate_command
    app.command("simulate")(simulate_command)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from policies import PolicyOptionError, UnknownPolicyError, parse_options
from propius.simulator.availability import AvailabilityModel
from propius.simulator.engine import Mode, SimConfig
from propius.simulator.population import PopulationModel
from propius.simulator.run import simulate
from propius.simulator.workload import load_workload
from propius.specs import SpecError

__all__ = ["app", "policy_options", "simulate_command"]

console = Console()


def policy_options(pairs: list[str]) -> dict[str, object]:
    """``--option key=value`` items as policy options (shared with ``propius up --policy-option``)."""
    try:
        return parse_options(pairs)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def simulate_command(
    workload: Annotated[str, typer.Argument(help="workload YAML, or a packaged one: policy-20jobs, utilization-5jobs")],
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = "propius",
    clients: Annotated[int | None, typer.Option(min=1, help="client count; default: the workload's first")] = None,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    mode: Annotated[str, typer.Option(help="central | static | client-random")] = "central",
    option: Annotated[list[str] | None, typer.Option(help="policy option key=value (repeatable)")] = None,
    days: Annotated[int, typer.Option(min=1, help="simulated days of client traces (the horizon)")] = 4,
    availability: Annotated[str, typer.Option(
        help="diurnal: seeded on/off sessions; always: every client online throughout (the utilization "
             "experiment's setting)")] = "diurnal",
    out: Annotated[Path, typer.Option(help="directory for the JSON and PNG")] = Path("simulation-results"),
) -> None:
    """Simulate a workload on seeded trace-driven clients with one policy; deterministic for a seed."""
    if mode not in ("central", "static", "client-random"):
        raise typer.BadParameter(f"unknown mode {mode!r}")
    if availability not in ("diurnal", "always"):
        raise typer.BadParameter(f"unknown availability {availability!r}")
    try:
        spec = load_workload(workload)
    except (SpecError, OSError) as error:
        console.print(f"[red]invalid workload[/] {workload}: {error}")
        raise typer.Exit(2) from None
    n = spec.client_counts[0] if clients is None else clients
    mode_: Mode = mode  # type: ignore[assignment]
    model = PopulationModel(availability=AvailabilityModel(mode=availability), days=days)  # type: ignore[arg-type]
    try:
        metrics, _ = simulate(spec, policy, n, seed, config=SimConfig(mode=mode_, seed=seed),
                              options=policy_options(option or []), model=model)
    except (UnknownPolicyError, PolicyOptionError) as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{spec.name}-{policy}-{mode}-{n}-s{seed}" + ("-always" if availability == "always" else "")
    (out / f"{stem}.json").write_text(json.dumps(metrics.to_dict(), indent=2))
    try:
        from propius.simulator.plots import plot_run  # matplotlib: the `sim` extra, not the core
    except ImportError:
        console.print("matplotlib is not installed (pip install 'propius[sim]'): no PNG plot")
    else:
        plot_run(metrics, out / f"{stem}.png")
    table = Table("metric", "value")
    for key, value in metrics.to_dict().items():
        if key != "jobs":
            table.add_row(key, f"{value:,.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    console.print(f"wrote {out / stem}.json and .png")


app = typer.Typer(help="Trace-driven simulation of Propius sharing policies.")
app.command("simulate")(simulate_command)

if __name__ == "__main__":
    app()
