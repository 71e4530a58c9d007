"""``propius fabric aggregate-bench``: the sharded aggregation tier on real processes, per algorithm.

Builds synthetic client updates (seeded, safetensors as clients upload them), runs the tier
(:func:`data_plane.collectives.tier.run_tier`) with gloo's own all_reduce, with StragglAR, and with the
selector's per-step choice, one shard late by an optional injected delay; prints each algorithm's times
from the last shard's arrival, writes the run as a CCL-Bench data point (the recorded torch.profiler
traces, :mod:`propius.trace.tier_export`) and the measurements as JSON beside it.
"""

from __future__ import annotations

import json
import shlex
import statistics
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from data_plane.collectives.cost import LinkCost
from data_plane.tensors import encode
from propius.fabric.model import Fabric, FabricError, load_fabric
from propius.specs import JobSpec

if TYPE_CHECKING:
    from data_plane.collectives.tier import Mode, TierRun

__all__ = ["aggregate_bench", "app", "fabric_link", "synthetic_cohorts"]

app = typer.Typer(help="Fabric benchmarks on real processes.", no_args_is_help=True)
console = Console()
MAX_TOTAL_BYTES = 1 << 30
"""All synthetic updates together (they are built in this process, then written for the shards)."""


def synthetic_cohorts(shards: int, updates_per_shard: int, numel: int, dtype: str, seed: int
                      ) -> list[list[tuple[bytes, float]]]:
    """Per shard, ``updates_per_shard`` updates of one ``numel`` tensor (Gaussian; for float64 rounded to
    integers after scaling by 1000) with num_samples drawn from 1..1024."""
    rng = np.random.default_rng(seed)
    cohorts = []
    for _ in range(shards):
        cohort = []
        for _ in range(updates_per_shard):
            values = rng.standard_normal(numel)
            tensor = np.rint(values * 1000) if dtype == "float64" else values.astype(np.float32)
            cohort.append((encode({"update": tensor}), float(rng.integers(1, 1025))))
        cohorts.append(cohort)
    return cohorts


def fabric_link(fabric: Fabric) -> LinkCost:
    """The selector's α-β for shards placed on ``fabric``: its first rail (an OCS rail flagged), with the
    latency of a NIC link onto it; a fabric without rails: its first link."""
    if fabric.rails:
        rail = fabric.rails[0]
        latency = next((link.latency_us for link in fabric.links if link.kind == "nic-rail" and link.b == rail.id),
                       1.0)
        return LinkCost.from_rail(rail, latency)
    if fabric.links:
        return LinkCost.from_link(fabric.links[0])
    raise FabricError("<fabric>", "no rail and no link to take the shards' link cost from")


def _ms(values: list[float]) -> str:
    return "/".join(f"{v * 1e3:.2f}" for v in (min(values), statistics.median(values), max(values)))


def _table(run: TierRun) -> Table:
    table = Table("mode", "ran", "after last arrival, ms (min/median/max)", "step, ms (median)",
                  "predicted ms (ring / rhd / stragglar)", title=f"{run.shards} shards, {run.bytes / 2**20:.2f} MiB "
                  f"partial sums, backend {run.backend}, shard {run.straggler} late by {run.delay_s * 1e3:g} ms")
    for mode in dict.fromkeys(step.mode for step in run.steps):
        steps = [step for step in run.steps if step.mode == mode]
        ran = ", ".join(f"{algo} x{sum(s.algorithm == algo for s in steps)}"
                        for algo in dict.fromkeys(s.algorithm for s in steps))
        last = steps[-1].predicted_s
        predicted = " / ".join(f"{last[a] * 1e3:.2f}" if a in last else "-" for a in ("ring", "rhd", "stragglar"))
        table.add_row(mode, ran, _ms([s.after_arrival_s for s in steps]),
                      f"{statistics.median(s.step_s for s in steps) * 1e3:.2f}", predicted)
    return table


@app.command("aggregate-bench")
def aggregate_bench(
    shards: Annotated[int, typer.Option(help="aggregator shards (processes), 2..16")] = 4,
    size_mib: Annotated[float, typer.Option(help="size of one update, MiB")] = 1.0,
    updates_per_shard: Annotated[int, typer.Option(help="updates in each shard's cohort")] = 2,
    steps: Annotated[int, typer.Option(help="profiled steps per algorithm")] = 5,
    delay_ms: Annotated[float, typer.Option(help="injected delay of the straggler shard's cohort, ms")] = 0.0,
    straggler: Annotated[int, typer.Option(help="the shard that is late (with --delay-ms)")] = 0,
    dtype: Annotated[str, typer.Option(help="float32 or float64 (integer-valued)")] = "float32",
    out_dir: Annotated[Path, typer.Option(help="where the data point and aggregate-bench.json go")] = Path(
        "benchmarks/results/aggregate-bench"),
    fabric: Annotated[Path | None, typer.Option(help="fabric YAML: the selector's link cost and the card's "
                                                     "network")] = None,
    job: Annotated[Path | None, typer.Option(help="job spec YAML: the card's model and job")] = None,
    seed: int = 0,
    timeout_s: Annotated[float, typer.Option(help="bound on the whole run")] = 300.0,
) -> None:
    """Run the sharded aggregation tier per algorithm and write a CCL-Bench data point of the run."""
    # Imported here: the tier and the trace export pull in Redis and SQL clients, which `propius --help` needs not.
    from data_plane.collectives.tier import LOOPBACK, MAX_SHARDS, MAX_UPDATE_BYTES, TierError, run_tier
    from propius.trace.check import check_data_point
    from propius.trace.datapoint import load_data_point
    from propius.trace.metrics import compute_metrics
    from propius.trace.tier_export import export_tier_run

    if dtype not in ("float32", "float64"):
        raise typer.BadParameter("float32 or float64", param_hint="--dtype")
    itemsize = 4 if dtype == "float32" else 8
    numel = int(size_mib * 2**20) // itemsize
    if not 1 <= numel * itemsize <= MAX_UPDATE_BYTES:
        raise typer.BadParameter(f"an update of 1 element to {MAX_UPDATE_BYTES >> 20} MiB", param_hint="--size-mib")
    if not 2 <= shards <= MAX_SHARDS:
        raise typer.BadParameter(f"2..{MAX_SHARDS}", param_hint="--shards")
    if not 1 <= updates_per_shard <= 64:
        raise typer.BadParameter("1..64", param_hint="--updates-per-shard")
    if shards * updates_per_shard * numel * itemsize > MAX_TOTAL_BYTES:
        raise typer.BadParameter(f"all updates together must stay within {MAX_TOTAL_BYTES >> 20} MiB",
                                 param_hint="--size-mib")
    try:
        fabric_model = load_fabric(fabric) if fabric is not None else None
        job_spec = JobSpec.from_yaml(job) if job is not None else None
    except (FabricError, OSError, ValueError) as error:
        console.print(f"[red]cannot read an input[/]: {error}")
        raise typer.Exit(2) from None
    link = fabric_link(fabric_model) if fabric_model is not None else LOOPBACK
    modes: tuple[Mode, ...] = ("allreduce", "stragglar", "auto") if shards >= 3 else ("allreduce", "auto")
    cohorts = synthetic_cohorts(shards, updates_per_shard, numel, dtype, seed)
    with tempfile.TemporaryDirectory(prefix="propius-tier-") as workdir:
        try:
            run = run_tier(cohorts, Path(workdir) / "run", steps=steps, modes=modes,
                           straggler=straggler if delay_ms > 0 else None, delay_s=delay_ms / 1e3, link=link,
                           timeout_s=timeout_s)
        except TierError as error:
            raise typer.BadParameter(str(error)) from None
        except RuntimeError as error:
            console.print(f"[red]the tier failed[/]: {error}")
            raise typer.Exit(1) from None
        command = shlex.join([
            "propius", "fabric", "aggregate-bench", "--shards", str(shards), "--size-mib", str(size_mib),
            "--updates-per-shard", str(updates_per_shard), "--steps", str(steps), "--delay-ms", str(delay_ms),
            "--straggler", str(straggler), "--dtype", dtype, "--seed", str(seed), "--out-dir", str(out_dir),
            *(["--fabric", str(fabric)] if fabric is not None else []), *(["--job", str(job)] if job else [])])
        folder = export_tier_run(run, out_dir, launch_command=command, job=job_spec, fabric=fabric_model)
    console.print(_table(run))
    problems = check_data_point(folder)
    metrics = compute_metrics(load_data_point(folder))
    summary = {
        "shards": shards, "size_mib": size_mib, "dtype": dtype, "updates_per_shard": updates_per_shard,
        "delay_ms": delay_ms, "straggler": run.straggler, "data_point": str(folder),
        "check_problems": [str(p) for p in problems], "metrics": metrics.as_dict(),
        "max_abs_diff_between_steps": run.max_abs_diff_between_steps,
        "per_mode": {mode: {"algorithms": [s.algorithm for s in run.steps if s.mode == mode],
                            "after_arrival_s": [s.after_arrival_s for s in run.steps if s.mode == mode],
                            "step_s": [s.step_s for s in run.steps if s.mode == mode]}
                     for mode in modes},
        "report": run.report,
    }
    (out_dir / "aggregate-bench.json").write_text(json.dumps(summary, indent=1))
    fraction = metrics.communication_fraction
    console.print(f"data point: {folder} ({'valid' if not problems else f'{len(problems)} problem(s)'}), "
                  f"communication fraction {'n/a' if fraction is None else f'{fraction * 100:.1f} %'}; "
                  f"results: {out_dir / 'aggregate-bench.json'}")
    if problems:
        raise typer.Exit(1)
