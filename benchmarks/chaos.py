"""Chaos suite: several jobs trained by ``propius-client`` daemons on real Redis and PostgreSQL, one fault
injected per phase, and what each fault cost.

    python -m benchmarks.chaos [--seed 0] [--faults daemon_kill,cp_kill,...] [--out FILE]

It starts its own ``redis-server`` on a free loopback port, a fresh PostgreSQL database on
``--pg-url``'s server, a control plane (``propius up``) and the daemons as processes; the plane reaches
Redis and PostgreSQL through loopback TCP proxies (:mod:`benchmarks.chaos_proxy`) so that an outage or a
stall can be injected without touching a shared server. Tasks sleep ``--train-s`` (longer than the
``--client-ttl-s`` the plane runs with) before they train (:mod:`benchmarks.chaos_executor`).

Faults, one per phase, each injected while a round is open with bound clients:

- ``daemon_kill``: kill -9 of one daemon, restarted 2 s later with the same device ids;
- ``cp_kill``: kill -9 of the control plane, restarted at once on the same port and data_dir;
- ``redis_restart``: kill -9 of redis-server, restarted empty (no persistence);
- ``pg_outage``: the database proxy refuses and resets every connection for ``--pg-outage-s``;
- ``redis_conn_kill``: ``CLIENT KILL`` of every normal and pub/sub connection;
- ``network_stall``: both proxies hold every byte for ``--stall-s``.

Reported per fault (events are counted in the phase whose window holds them): recovery time (from the
fault's end to the next accepted update or closed round), rounds lost (rounds of a completed job that
never closed), rounds run twice (a round closed by two attempts, or handed to the job twice), accepted
updates lost (an upload a device saw accepted that is not a completed binding in SQL), and at the end
whether every job completed with its spec's rounds and every durable row is terminal (no job live, no
round open, no binding still ``bound``). Nothing is hidden: a fault that breaks something shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import redis
import sqlalchemy as sa

from benchmarks.chaos_proxy import TcpProxy
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import AsyncJob, RoundFailed
from propius.specs import JobSpec

REPO = Path(__file__).resolve().parents[1]
FAULTS = ("daemon_kill", "cp_kill", "redis_restart", "pg_outage", "redis_conn_kill", "network_stall")
_UPLOADED = re.compile(r"^(\S+ \S+) INFO \S+: device (\S+): job (\S+) round (\d+): update uploaded")


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 0
    faults: tuple[str, ...] = FAULTS
    jobs: int = 3
    rounds: int = 8
    demand: int = 2
    daemons: int = 4
    devices: int = 2
    train_s: float = 3.0
    client_ttl_s: float = 2.0
    lease_s: float = 2.0
    pg_outage_s: float = 30.0
    stall_s: float = 5.0
    recovery_timeout_s: float = 60.0
    run_timeout_s: float = 300.0
    pg_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass
class FaultReport:
    fault: str
    injected_at: float
    healed_at: float
    recovery_s: float | None = None
    rounds_lost: int = 0
    rounds_run_twice: int = 0
    accepted_updates_lost: int = 0


@dataclass
class ChaosReport:
    config: dict[str, object]
    faults: list[FaultReport] = field(default_factory=list)
    jobs_total: int = 0
    jobs_with_right_rounds: int = 0
    rows_terminal: bool = False
    non_terminal_rows: dict[str, int] = field(default_factory=dict)
    driver_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def clean(self) -> bool:
        losses = sum(f.rounds_lost + f.rounds_run_twice + f.accepted_updates_lost for f in self.faults)
        recovered = all(f.recovery_s is not None for f in self.faults)
        return (losses == 0 and recovered and self.rows_terminal and not self.driver_errors
                and self.jobs_with_right_rounds == self.jobs_total)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """The processes and proxies of one run; it signals only the processes it started."""

    def __init__(self, config: ChaosConfig, work: Path) -> None:
        self.config = config
        self.work = work
        self.redis_port = free_port()
        self.plane_port = free_port()
        self.database = f"chaos_{uuid.uuid4().hex[:12]}"
        self.pg_admin = sa.create_engine(config.pg_url, isolation_level="AUTOCOMMIT")
        pg = sa.make_url(config.pg_url)
        self.pg_proxy = TcpProxy(pg.host or "127.0.0.1", pg.port or 5432)
        self.redis_proxy = TcpProxy("127.0.0.1", self.redis_port)
        self.redis_server: subprocess.Popen | None = None
        self.plane: subprocess.Popen | None = None
        self.daemons: dict[int, subprocess.Popen] = {}
        self._plugin_dir = work / "plugins"
        self.plane_starts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.plane_port}"

    def database_url(self, through_proxy: bool = True) -> str:
        url = sa.make_url(self.config.pg_url).set(database=self.database)
        if through_proxy:
            url = url.set(host="127.0.0.1", port=self.pg_proxy.port)
        return url.render_as_string(hide_password=False)

    def start(self) -> None:
        with self.pg_admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{self.database}"'))
        self.pg_proxy.start()
        self.redis_proxy.start()
        self.start_redis()
        self._write_plugin()
        self.start_plane()
        for index in range(self.config.daemons):
            self.start_daemon(index)

    def _write_plugin(self) -> None:
        """Register the chaos executor for the daemons as an entry point of a metadata-only distribution."""
        info = self._plugin_dir / "propius_chaos-0.0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: propius-chaos\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text(
            "[propius.executors]\nslow-train = benchmarks.chaos_executor:SlowTrainExecutor\n")

    def _env(self) -> dict[str, str]:
        path = os.pathsep.join([str(REPO), str(self._plugin_dir), os.environ.get("PYTHONPATH", "")])
        # plaintext on loopback, asked for explicitly (docs/deploy.md)
        return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "PROPIUS_INSECURE": "1"}

    def start_redis(self) -> None:
        command = ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", str(self.work)]
        self.redis_server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: _redis_up(self.redis_port), 10, "redis-server")

    def kill_redis(self) -> None:
        assert self.redis_server is not None
        self.redis_server.kill()
        self.redis_server.wait(10)

    def start_plane(self) -> None:
        self.plane_starts += 1
        env = {**self._env(), "PROPIUS_AUTH": "open", "PROPIUS_CLIENT_TTL_S": str(self.config.client_ttl_s),
               "PROPIUS_LEASE_S": str(self.config.lease_s), "PROPIUS_SCHEDULER_PERIOD_S": "0.5",
               "PROPIUS_MAX_WAIT_S": "5", "PROPIUS_OFFER_TTL_S": "5", "PROPIUS_SUPPLY_PERIOD_S": "2"}
        command = [sys.executable, "-m", "propius.cli", "up", "--redis-url",
                   f"redis://127.0.0.1:{self.redis_proxy.port}/0", "--database-url", self.database_url(),
                   "--port", str(self.plane_port), "--data-dir", str(self.work / "plane")]
        log = (self.work / f"plane-{self.plane_starts}.log").open("w")
        self.plane = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        _wait(lambda: _serving(self.address) or self.plane.poll() is not None, 60, "control plane")
        if self.plane.poll() is not None:
            raise RuntimeError(f"control plane exited: see {log.name}")

    def kill_plane(self) -> None:
        assert self.plane is not None
        self.plane.kill()
        self.plane.wait(10)

    def start_daemon(self, index: int) -> None:
        devices = self.config.devices
        command = [sys.executable, "-m", "clients.daemon", "--server", self.address, "--devices", str(devices),
                   "--device-offset", str(index * devices), "--seed", str(self.config.seed * 100 + index),
                   "--state-dir", str(self.work / f"daemon-{index}")]
        log = (self.work / f"daemon-{index}.log").open("a")
        self.daemons[index] = subprocess.Popen(command, cwd=REPO, env=self._env(), stdout=log,
                                               stderr=subprocess.STDOUT)

    def kill_daemon(self, index: int) -> None:
        self.daemons[index].kill()
        self.daemons[index].wait(10)

    def uploads(self) -> list[tuple[float, str, str, int]]:
        """(time, device, job, round) of every upload a device saw accepted, from the daemons' logs."""
        seen = []
        for path in self.work.glob("daemon-*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if match := _UPLOADED.match(line):
                    at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    seen.append((at, match[2], match[3], int(match[4])))
        return seen

    def close(self) -> None:
        for process in [*self.daemons.values(), self.plane, self.redis_server]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(10)
        with self.pg_admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        self.pg_admin.dispose()
        for proxy in (self.pg_proxy, self.redis_proxy):
            with contextlib.suppress(Exception):
                proxy.stop()


def _redis_up(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    except redis.exceptions.ConnectionError:
        return False


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(), timeout=1)
            return True
        except grpc.RpcError:
            return False


def _wait(check, timeout_s: float, what: str) -> None:  # noqa: ANN001 - a zero-argument predicate
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout_s} s")
        time.sleep(0.1)


# ---------------------------------------------------------------- the jobs


@dataclass
class JobRun:
    name: str
    job_id: str = ""
    rounds: list[tuple[int, int, float]] = field(default_factory=list)  # (round, attempt, when its aggregate came)
    error: str = ""


def job_spec(config: ChaosConfig, index: int) -> JobSpec:
    return JobSpec.parse({
        "name": f"chaos-{index}", "rounds": config.rounds, "demand": config.demand, "over_selection": 1.0,
        "schedule_timeout_s": 60, "execution_timeout_s": 60,
        "task": {"executor": "slow-train", "local_steps": 2,
                 "options": {"train_s": config.train_s, "data_seed": index, "init_seed": index}},
    })


async def drive(spec: JobSpec, address: str, run: JobRun) -> None:
    """The job's rounds through the SDK, as an application would run them: a failed attempt is started again."""
    from clients.executors.models import initial_weights

    weights = initial_weights(spec.task, seed=0)
    try:
        async with AsyncJob(spec, address) as job:
            run.job_id = job.job_id
            while len({r for r, _, _ in run.rounds}) < (spec.rounds or 0):
                info = await _open_round(job)
                if info is None:
                    break
                await job.publish_model(info.round, weights)
                try:
                    result = await job.await_aggregate(info.round, timeout_s=300)
                except RoundFailed:
                    continue
                run.rounds.append((result.info.round, result.info.attempt, time.time()))
                weights = result.tensors
    except Exception as error:  # noqa: BLE001 - reported, not raised: the run goes on for the other jobs
        run.error = f"{type(error).__name__}: {error}"


async def _open_round(job: AsyncJob) -> pb.RoundInfo | None:
    """A new round, or the open one when a retried StartRound found it already open (its reply was lost)."""
    try:
        return await job.start_round()
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
            raise
        info = await job.info()
        if info.current_round.state == pb.ROUND_STATE_OPEN:
            return info.current_round
        if info.rounds_total and info.rounds_done >= info.rounds_total:
            return None
        raise


async def progress(address: str) -> tuple[int, int, int]:
    """(rounds done, results in open rounds, bound in open rounds) over every live job."""
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(), timeout=2)
    open_rounds = [j.current_round for j in reply.jobs if j.current_round.state == pb.ROUND_STATE_OPEN]
    return (sum(j.rounds_done for j in reply.jobs), sum(r.results for r in open_rounds),
            sum(r.bound for r in open_rounds))


async def _poll(address: str) -> tuple[int, int, int] | None:
    try:
        return await progress(address)
    except grpc.aio.AioRpcError:
        return None


# ---------------------------------------------------------------- faults


async def inject(cluster: Cluster, fault: str, rng: random.Random) -> None:
    """Inject ``fault`` and return when it is healed."""
    config = cluster.config
    if fault == "daemon_kill":
        index = rng.randrange(config.daemons)
        cluster.kill_daemon(index)
        await asyncio.sleep(2.0)
        cluster.start_daemon(index)
    elif fault == "cp_kill":
        cluster.kill_plane()
        await asyncio.to_thread(cluster.start_plane)
    elif fault == "redis_restart":
        cluster.kill_redis()
        await asyncio.sleep(1.0)
        await asyncio.to_thread(cluster.start_redis)
    elif fault == "pg_outage":
        cluster.pg_proxy.cut()
        await asyncio.sleep(config.pg_outage_s)
        cluster.pg_proxy.restore()
    elif fault == "redis_conn_kill":
        admin = redis.Redis(port=cluster.redis_port)
        admin.client_kill_filter(_type="normal", skipme=True)
        admin.client_kill_filter(_type="pubsub")
        admin.close()
    elif fault == "network_stall":
        cluster.pg_proxy.stall()
        cluster.redis_proxy.stall()
        await asyncio.sleep(config.stall_s)
        cluster.pg_proxy.restore()
        cluster.redis_proxy.restore()
    else:
        raise ValueError(f"unknown fault {fault!r}")


async def _mid_round(address: str, timeout_s: float) -> None:
    """Wait until some round is open with bound clients (so the fault hits work in flight)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = await _poll(address)
        if state is not None and state[2] > 0:
            return
        await asyncio.sleep(0.2)


async def _recovered(cluster: Cluster, before: tuple[int, int, int] | None, since: float) -> float | None:
    """Seconds from ``since`` until a device saw an update accepted or a round closed; None: not in time."""
    deadline = time.monotonic() + cluster.config.recovery_timeout_s
    while time.monotonic() < deadline:
        state = await _poll(cluster.address)
        closed = state is not None and before is not None and state[0] > before[0]
        uploaded = [at for at, *_ in await asyncio.to_thread(cluster.uploads) if at > since]
        if closed or uploaded:
            return (min(uploaded) if uploaded else time.time()) - since
        await asyncio.sleep(0.25)
    return None


# ---------------------------------------------------------------- the run


async def run_chaos(config: ChaosConfig, work: Path) -> ChaosReport:
    started = time.time()
    rng = random.Random(config.seed)
    report = ChaosReport(config={**asdict(config), "faults": list(config.faults)})
    cluster = Cluster(config, work)
    try:
        await asyncio.to_thread(cluster.start)
        specs = [job_spec(config, index) for index in range(config.jobs)]
        runs = [JobRun(spec.name) for spec in specs]
        drivers = [asyncio.create_task(drive(spec, cluster.address, run))
                   for spec, run in zip(specs, runs, strict=True)]
        for fault in config.faults:
            await _mid_round(cluster.address, config.recovery_timeout_s)
            before = await _poll(cluster.address)
            injected = time.time()
            await inject(cluster, fault, rng)
            healed = time.time()
            recovery = await _recovered(cluster, before, healed)
            report.faults.append(FaultReport(fault, injected, healed, recovery))
        _, unfinished = await asyncio.wait(drivers, timeout=config.run_timeout_s)
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        for run, task in zip(runs, drivers, strict=True):
            if task in unfinished:
                run.error = f"did not finish within {config.run_timeout_s:.0f} s ({len(run.rounds)} rounds done)"
        report.driver_errors = [f"{run.name}: {run.error}" for run in runs if run.error]
        await _settled(cluster, config.recovery_timeout_s)
        _audit(cluster, specs, runs, report)
    finally:
        cluster.close()  # not in a thread: a cancelled run must still clean up before it returns
    report.wall_s = time.time() - started
    return report


def _phase(report: ChaosReport, at: float) -> FaultReport | None:
    """The fault whose phase (from its injection to the next one) holds time ``at``."""
    current = None
    for fault in report.faults:
        if at >= fault.injected_at:
            current = fault
    return current


@dataclass
class _StoreRows:
    """What the durable store holds at the end of a run: what the audit reads, and what it waits for."""

    jobs: dict[str, Any]  # job_id -> (job_id, state, rounds_done)
    rounds: list[Any]  # (job_id, round, attempt, state, closed_at)
    completed: set[tuple[str, str, int]]  # (client_id, job_id, round) of completed bindings
    bound: int  # bindings still bound

    def non_terminal(self) -> dict[str, int]:
        return {
            "jobs_live": sum(1 for job in self.jobs.values() if job.state not in ("completed", "cancelled")),
            "rounds_open": sum(1 for row in self.rounds if row.state == "open"),
            "bindings_bound": self.bound,
        }


def _read_store(cluster: Cluster) -> _StoreRows:
    engine = sa.create_engine(cluster.database_url(through_proxy=False))
    try:
        with engine.connect() as db:
            jobs = {row.job_id: row for row in db.execute(sa.text("SELECT job_id, state, rounds_done FROM jobs"))}
            rounds = list(db.execute(sa.text("SELECT job_id, round, attempt, state, closed_at FROM rounds")))
            completed = {(row.client_id, row.job_id, row.round) for row in db.execute(
                sa.text("SELECT client_id, job_id, round FROM bindings WHERE outcome = 'completed'"))}
            bound = db.execute(sa.text("SELECT count(*) FROM bindings WHERE outcome = 'bound'")).scalar_one()
    finally:
        engine.dispose()
    return _StoreRows(jobs, rounds, completed, int(bound))


def _unsettled(cluster: Cluster) -> bool:
    """Whether the durable store still lags the run: a live job, an open round, a bound binding, or an
    update a device saw accepted with no completed binding (the plane's write-behind journal not yet flushed)."""
    store = _read_store(cluster)
    return any(store.non_terminal().values()) or any(
        (device, job_id, round_) not in store.completed for _, device, job_id, round_ in cluster.uploads())


async def _settled(cluster: Cluster, timeout_s: float) -> None:
    """Wait until the durable store has caught up with the run (:func:`_unsettled`), for at most ``timeout_s``:
    the audit then counts whatever is still missing as lost."""
    deadline = time.monotonic() + timeout_s
    while await asyncio.to_thread(_unsettled, cluster) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)


def _audit(cluster: Cluster, specs: list[JobSpec], runs: list[JobRun], report: ChaosReport) -> None:
    store = _read_store(cluster)
    jobs, rounds, completed = store.jobs, store.rounds, store.completed
    report.jobs_total = len(specs)
    for spec, run in zip(specs, runs, strict=True):
        job = jobs.get(run.job_id)
        closed = Counter(r.round for r in rounds if r.job_id == run.job_id and r.state == "closed")
        handed = Counter(r for r, _, _ in run.rounds)
        if job is not None and job.state == "completed" and job.rounds_done == spec.rounds and set(closed) == set(
                range(spec.rounds or 0)):
            report.jobs_with_right_rounds += 1
        lost = (spec.rounds or 0) - len(set(closed) & set(range(spec.rounds or 0)))
        if lost and (fault := _phase(report, max((at for _, _, at in run.rounds), default=time.time()))):
            fault.rounds_lost += lost
        closes = sorted((row.round, row.closed_at or 0.0) for row in rounds
                        if row.job_id == run.job_id and row.state == "closed")
        for (round_, _), (again, at) in zip(closes, closes[1:], strict=False):
            if again == round_ and (fault := _phase(report, at)) is not None:
                fault.rounds_run_twice += 1
        for round_, count in handed.items():
            if count > 1:
                at = sorted(a for r, _, a in run.rounds if r == round_)[1]
                if (fault := _phase(report, at)) is not None:
                    fault.rounds_run_twice += count - 1
    for at, device, job_id, round_ in cluster.uploads():
        if (device, job_id, round_) not in completed and (fault := _phase(report, at)) is not None:
            fault.accepted_updates_lost += 1
    report.non_terminal_rows = store.non_terminal()
    report.rows_terminal = not any(report.non_terminal_rows.values())


def print_report(report: ChaosReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"chaos run ({report.wall_s:.0f} s)")
    for column in ("fault", "recovery s", "rounds lost", "rounds run twice", "accepted updates lost"):
        table.add_column(column, justify="right" if column != "fault" else "left")
    for fault in report.faults:
        recovery = "never" if fault.recovery_s is None else f"{fault.recovery_s:.1f}"
        table.add_row(fault.fault, recovery, str(fault.rounds_lost), str(fault.rounds_run_twice),
                      str(fault.accepted_updates_lost))
    console = Console()
    console.print(table)
    console.print(f"jobs with the right number of rounds: {report.jobs_with_right_rounds}/{report.jobs_total}")
    console.print(f"every durable row terminal: {report.rows_terminal} {report.non_terminal_rows}")
    for error in report.driver_errors:
        console.print(f"[red]job driver error[/] {error}")


def main(argv: list[str] | None = None) -> int:
    defaults = ChaosConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--faults", default=",".join(defaults.faults), help=f"comma-separated, from {FAULTS}")
    for name in ("jobs", "rounds", "demand", "daemons", "devices"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    for name in ("train_s", "client_ttl_s", "lease_s", "pg_outage_s", "stall_s"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float, default=getattr(defaults, name))
    parser.add_argument("--pg-url", default=os.environ.get("PROPIUS_TEST_PG_URL", defaults.pg_url))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "chaos.json")
    parser.add_argument("--work-dir", type=Path, help="keep the processes' logs here (default: a temporary dir)")
    args = parser.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    if unknown := set(faults) - set(FAULTS):
        parser.error(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
    config = ChaosConfig(seed=args.seed, faults=faults, jobs=args.jobs, rounds=args.rounds, demand=args.demand,
                         daemons=args.daemons, devices=args.devices, train_s=args.train_s,
                         client_ttl_s=args.client_ttl_s, lease_s=args.lease_s, pg_outage_s=args.pg_outage_s,
                         stall_s=args.stall_s, pg_url=args.pg_url)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a terminated run cleans up as on Ctrl-C
    with tempfile.TemporaryDirectory(prefix="propius-chaos-") as temporary:
        work = args.work_dir or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        report = asyncio.run(run_chaos(config, work))
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**asdict(report), "clean": report.clean}, indent=2) + "\n")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
