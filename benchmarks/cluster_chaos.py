"""Scale-out chaos run: two control-plane shards on a 6-node Redis Cluster and PostgreSQL, clients binding
and uploading, one shard and one Redis primary killed mid-run.

    python -m benchmarks.cluster_chaos [--seed 0] [--out benchmarks/results/cluster_chaos.json]

It starts a local Redis Cluster (:mod:`propius.local_cluster`: three primaries, a replica each), a fresh
PostgreSQL database on ``--pg-url``'s server, two shards (``propius up``, sharing one ``data_dir`` as
shards on one host or volume do, with ``durable_updates`` on) and ``propius-client`` daemons. Every daemon
and job driver is given both shards as one gRPC target (``ipv4:A,B``, half of them B first), so a client
whose shard dies re-homes to the other. Built on :mod:`benchmarks.chaos` (jobs, executor, audit).

Faults, each while a round is open with bound clients:

- ``shard_kill``: SIGKILL of shard 0, where every other job opens its rounds; it is not restarted (its
  rounds are taken over by the other shard once its liveness lapses, ``--shard-ttl-s``);
- ``primary_kill``: SIGKILL of the Redis primary that holds a running job's keys; its replica takes over
  after ``--node-timeout-ms``.

Reported: per fault the recovery time (from the kill to the next accepted update or closed round, and for
the primary, until the cluster served every slot again), then over the run: accepted updates lost (an
upload a device saw accepted that is not a completed binding in SQL), accepted updates not in their
round's aggregate (completed in an attempt that did not close), double binds (an attempt with more
bindings than its target, or a client completed twice in one round), rounds lost or run twice, and
whether every job completed with its rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa

from benchmarks.chaos import (
    REPO,
    ChaosConfig,
    ChaosReport,
    Cluster,
    FaultReport,
    JobRun,
    _audit,
    _mid_round,
    _poll,
    _recovered,
    _serving,
    _settled,
    _wait,
    drive,
    free_port,
    job_spec,
)
from propius.local_cluster import LocalCluster, local_cluster

FAULTS = ("shard_kill", "primary_kill")


@dataclass
class ScaleOutReport:
    chaos: ChaosReport
    failover_s: float | None = None  # the killed primary: until the cluster served every slot again
    takeover_s: float | None = None  # the killed shard: until the other served its first orphaned round
    kept_updates_refolded: int = 0  # accepted updates of the dead shard's rounds that the other folded again
    updates_accepted: int = 0
    updates_lost: int = 0
    updates_not_in_aggregate: int = 0
    double_binds: int = 0
    double_bind_details: list[str] = field(default_factory=list)
    missing_details: list[str] = field(default_factory=list)
    journal_duplicate_rows: int = 0  # identical binding rows a re-written journal batch left (one binding each)

    @property
    def clean(self) -> bool:
        return (self.chaos.clean and self.updates_lost == 0 and self.updates_not_in_aggregate == 0
                and self.double_binds == 0)


class ShardedCluster(Cluster):
    """The chaos suite's processes with two shards on a Redis Cluster (no proxies: faults are kills)."""

    def __init__(self, config: ChaosConfig, work: Path, redis: LocalCluster, shard_ttl_s: float) -> None:
        super().__init__(config, work)
        self.redis = redis
        self.shard_ttl_s = shard_ttl_s
        self.shard_ports = [free_port(), free_port()]
        self.shards: dict[int, subprocess.Popen] = {}

    @property
    def address(self) -> str:
        return self.target(0)

    def target(self, first: int) -> str:
        """Both shards as one gRPC target, shard ``first`` preferred (pick_first moves on when it dies)."""
        ports = self.shard_ports[first:] + self.shard_ports[:first]
        return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)

    def start(self) -> None:
        with self.pg_admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{self.database}"'))
        self._write_plugin()
        for index in range(2):  # one after the other: the first creates the schema
            self.start_shard(index)
        for index in range(self.config.daemons):
            self.start_daemon(index)

    def start_shard(self, index: int) -> None:
        env = {**self._env(), "PROPIUS_AUTH": "open", "PROPIUS_CLIENT_TTL_S": str(self.config.client_ttl_s),
               "PROPIUS_LEASE_S": str(self.config.lease_s), "PROPIUS_SCHEDULER_PERIOD_S": "0.5",
               "PROPIUS_MAX_WAIT_S": "5", "PROPIUS_OFFER_TTL_S": "5", "PROPIUS_SUPPLY_PERIOD_S": "2",
               "PROPIUS_SHARD_TTL_S": str(self.shard_ttl_s), "PROPIUS_DURABLE_UPDATES": "true"}
        command = [sys.executable, "-m", "propius.cli", "up", "--redis-url", self.redis.url,
                   "--database-url", self.database_url(through_proxy=False), "--port", str(self.shard_ports[index]),
                   "--data-dir", str(self.work / "plane")]
        log = (self.work / f"shard-{index}.log").open("w")
        self.shards[index] = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        address = f"127.0.0.1:{self.shard_ports[index]}"
        _wait(lambda: _serving(address) or self.shards[index].poll() is not None, 60, f"shard {index}")
        if self.shards[index].poll() is not None:
            raise RuntimeError(f"shard {index} exited: see {log.name}")

    def start_daemon(self, index: int) -> None:
        devices = self.config.devices
        command = [sys.executable, "-m", "clients.daemon", "--server", self.target(index % 2), "--devices",
                   str(devices), "--device-offset", str(index * devices), "--seed", str(self.config.seed * 100 + index),
                   "--state-dir", str(self.work / f"daemon-{index}")]
        log = (self.work / f"daemon-{index}.log").open("a")
        self.daemons[index] = subprocess.Popen(command, cwd=REPO, env=self._env(), stdout=log,
                                               stderr=subprocess.STDOUT)

    def kill_shard(self, index: int) -> None:
        self.shards[index].send_signal(signal.SIGKILL)
        self.shards[index].wait(10)

    def close(self) -> None:
        for process in [*self.daemons.values(), *self.shards.values()]:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(10)
        with self.pg_admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))
        self.pg_admin.dispose()


async def _with_results(address: str, timeout_s: float) -> bool:
    """Wait until an open round has accepted an update (and still waits for more); False: none in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = await _poll(address)
        if state is not None and state[1] > 0:
            return True
        await asyncio.sleep(0.05)
    return False


async def inject(cluster: ShardedCluster, fault: str, job_ids: list[str], report: ScaleOutReport) -> None:
    if fault == "shard_kill":  # shard 0: the jobs driven through it first (every other one) opened their rounds there
        cluster.kill_shard(0)
    elif fault == "primary_kill":
        client = cluster.redis.client()
        try:
            slot = client.keyslot(f"propius:{{job:{job_ids[0]}}}:round")
            port = client.nodes_manager.get_node_from_slot(slot).port
        finally:
            client.close()
        killed = time.monotonic()
        cluster.redis.kill(port)
        waited = await asyncio.to_thread(cluster.redis.wait_healthy, 60.0)
        report.failover_s = time.monotonic() - killed if waited is not None else None
    else:
        raise ValueError(f"unknown fault {fault!r}")


async def run(config: ChaosConfig, work: Path, shard_ttl_s: float, node_timeout_ms: int) -> ScaleOutReport:
    started = time.time()
    report = ScaleOutReport(ChaosReport(config={**asdict(config), "faults": list(config.faults),
                                                "shard_ttl_s": shard_ttl_s, "node_timeout_ms": node_timeout_ms}))
    with local_cluster(node_timeout_ms=node_timeout_ms) as redis:
        cluster = ShardedCluster(config, work, redis, shard_ttl_s)
        try:
            await asyncio.to_thread(cluster.start)
            specs = [job_spec(config, index) for index in range(config.jobs)]
            runs = [JobRun(spec.name) for spec in specs]
            drivers = [asyncio.create_task(drive(spec, cluster.target(index % 2), run))
                       for index, (spec, run) in enumerate(zip(specs, runs, strict=True))]
            for fault in config.faults:
                if fault == "shard_kill":  # best: a round holding an accepted update, which must survive
                    await _with_results(cluster.address, 20.0)
                await _mid_round(cluster.address, config.recovery_timeout_s)
                before = await _poll(cluster.address)
                injected = time.time()
                await inject(cluster, fault, [r.job_id for r in runs if r.job_id], report)
                recovery = await _recovered(cluster, before, injected)
                report.chaos.faults.append(FaultReport(fault, injected, injected, recovery))
            _, unfinished = await asyncio.wait(drivers, timeout=config.run_timeout_s)
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
            for run_, task in zip(runs, drivers, strict=True):
                if task in unfinished:
                    run_.error = f"did not finish in {config.run_timeout_s:.0f} s ({len(run_.rounds)} rounds done)"
            report.chaos.driver_errors = [f"{r.name}: {r.error}" for r in runs if r.error]
            await _settled(cluster, config.recovery_timeout_s)
            _audit(cluster, specs, runs, report.chaos)
            _takeover(cluster, report)
            _audit_bindings(cluster, report)
        finally:
            cluster.close()
    report.chaos.wall_s = time.time() - started
    return report


_CONTINUED = re.compile(r"^(\S+ \S+) INFO control_plane.rounds: job \S+: continuing round \S+ with (\d+) kept")


def _takeover(cluster: ShardedCluster, report: ScaleOutReport) -> None:
    """From the surviving shard's log: when it took the dead shard's rounds over, and with how many updates."""
    kill = next((f.injected_at for f in report.chaos.faults if f.fault == "shard_kill"), None)
    continued = [(datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp(), int(m[2]))
                 for line in (cluster.work / "shard-1.log").read_text(errors="replace").splitlines()
                 if (m := _CONTINUED.match(line))]
    if kill is not None and continued:
        report.takeover_s = min(at for at, _ in continued) - kill
        report.kept_updates_refolded = sum(count for _, count in continued)


def _audit_bindings(cluster: ShardedCluster, report: ScaleOutReport) -> None:
    """Double binds and accepted updates that missed their aggregate, from the durable record.

    The journal delivers at least once (a batch committed just before its writer died is written again
    by whoever adopts its file), so one binding may appear as identical rows: those are one binding."""
    engine = sa.create_engine(cluster.database_url(through_proxy=False))
    with engine.connect() as db:
        attempts = {(r.job_id, r.round, r.attempt): r for r in db.execute(
            sa.text("SELECT job_id, round, attempt, state, target, results FROM rounds"))}
        rows = list(db.execute(sa.text("SELECT job_id, round, attempt, client_id, bound_at, outcome FROM bindings")))
    engine.dispose()
    bindings: dict[tuple[str, int, int, str], set[float]] = {}
    for row in rows:
        bindings.setdefault((row.job_id, row.round, row.attempt, row.client_id), set()).add(round(row.bound_at, 3))
    report.journal_duplicate_rows = len(rows) - sum(len(times) for times in bindings.values())
    twice = [f"{key}: bound at {sorted(times)}" for key, times in bindings.items() if len(times) > 1]
    distinct = {(r.job_id, r.round, r.attempt, r.client_id) for r in rows if r.outcome == "completed"}
    completed = Counter((job_id, round_, attempt) for job_id, round_, attempt, _ in distinct)
    over = [f"{key}: {count} completed, target {attempts[key].target}" for key, count in completed.items()
            if key in attempts and count > attempts[key].target]
    report.double_bind_details = twice + over
    report.double_binds = len(report.double_bind_details)
    closed = {key for key, attempt in attempts.items() if attempt.state == "closed"}
    in_closed = {(r.client_id, r.job_id, r.round) for r in rows
                 if r.outcome == "completed" and (r.job_id, r.round, r.attempt) in closed}
    uploads = {(device, job_id, round_) for _, device, job_id, round_ in cluster.uploads()}
    report.updates_accepted = len(uploads)
    report.updates_lost = sum(f.accepted_updates_lost for f in report.chaos.faults)
    report.updates_not_in_aggregate = len(uploads - in_closed)
    report.missing_details = [  # what SQL holds of each accepted update that is not in a closed attempt
        f"{client} job {job_id} round {round_}: " + (", ".join(
            f"attempt {r.attempt} {r.outcome} (attempt {attempts[(r.job_id, r.round, r.attempt)].state})"
            for r in rows if (r.client_id, r.job_id, r.round) == (client, job_id, round_)) or "no binding row")
        for client, job_id, round_ in sorted(uploads - in_closed)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--demand", type=int, default=3, help="clients per round (3 jobs x 3 > 8 devices: "
                        "rounds fill one client at a time, so a round holds accepted updates while it waits)")
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--train-s", type=float, default=2.0)
    parser.add_argument("--shard-ttl-s", type=float, default=3.0)
    parser.add_argument("--node-timeout-ms", type=int, default=2000)
    parser.add_argument("--pg-url", default=os.environ.get("PROPIUS_TEST_PG_URL", ChaosConfig().pg_url))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cluster_chaos.json")
    parser.add_argument("--work-dir", type=Path, help="keep the processes' logs here (default: a temporary dir)")
    args = parser.parse_args(argv)
    random.seed(args.seed)
    config = ChaosConfig(seed=args.seed, faults=FAULTS, jobs=args.jobs, rounds=args.rounds, demand=args.demand,
                         daemons=args.daemons, devices=args.devices, train_s=args.train_s, pg_url=args.pg_url,
                         run_timeout_s=240.0)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    os.environ["PROPIUS_INSECURE"] = "1"  # the job drivers' channels: plaintext on loopback, explicitly
    with tempfile.TemporaryDirectory(prefix="propius-cluster-chaos-") as temporary:
        work = args.work_dir or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        report = asyncio.run(run(config, work, args.shard_ttl_s, args.node_timeout_ms))
    chaos = report.chaos
    for fault in chaos.faults:
        recovery = "never" if fault.recovery_s is None else f"{fault.recovery_s:.1f} s"
        print(f"{fault.fault}: recovered in {recovery}; rounds lost {fault.rounds_lost}, run twice "
              f"{fault.rounds_run_twice}, accepted updates lost {fault.accepted_updates_lost}")
    print(f"shard take-over (kill to the first orphaned round served): "
          f"{report.takeover_s and round(report.takeover_s, 1)} s, {report.kept_updates_refolded} kept updates folded "
          f"again; redis primary failover (every slot served again): "
          f"{report.failover_s and round(report.failover_s, 1)} s")
    print(f"accepted updates: {report.updates_accepted}, lost {report.updates_lost}, not in their round's aggregate "
          f"{report.updates_not_in_aggregate}; double binds {report.double_binds} {report.double_bind_details}; "
          f"binding rows written twice by the journal: {report.journal_duplicate_rows}")
    print(f"jobs with the right rounds: {chaos.jobs_with_right_rounds}/{chaos.jobs_total}; rows terminal: "
          f"{chaos.rows_terminal} {chaos.non_terminal_rows}; {chaos.wall_s:.0f} s")
    for line in report.missing_details:
        print(f"not in an aggregate: {line}")
    for error in chaos.driver_errors:
        print(f"job driver error: {error}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {**asdict(report), "clean": report.clean, "command": " ".join(["python -m benchmarks.cluster_chaos",
                                                                          *(argv or sys.argv[1:])])}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"clean: {report.clean}; wrote {args.out}")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
