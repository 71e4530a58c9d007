"""Binding throughput: N simulated clients check in and bind against K jobs over gRPC loopback.

The control plane runs as its own process (``propius up``) on the real Redis; this process is the load:
asyncio clients in ``--load-procs`` processes, each client doing CheckIn (its own profile, session and
offers) then Accept of its first offer, ``--concurrency`` clients in flight in all. Transports:

- ``mux``: each load process is a client daemon hosting its clients, whose calls share one
  ``ClientService.Multiplex`` stream (what ``propius-client`` does); every call is still answered
  one by one, with the same checks and the same atomic bind as the unary RPCs;
- ``unary``: one CheckIn and one Accept RPC per client.

Reports binds/s (first check-in to last accept), p50/p99 latency of check-in and accept, and the CPU
milliseconds per bind of the control plane, the load processes and Redis (what a bind costs, whatever
else the machine is doing), for each run and as medians over ``--repeat`` runs; writes JSON.

Plaintext by default; ``--tls`` runs every scenario twice, in plaintext and with mutual TLS (the
docker-compose deployment: certificates from ``propius certs init``, client certificates required), and
reports what TLS costs per bind.

    python benchmarks/bind_throughput.py --clients 1000 10000 --load-procs 2 --concurrency 64 \\
        --transport mux unary --repeat 3
    python benchmarks/bind_throughput.py --clients 2000 --repeat 1 --tls

Scale-out: ``--shards 1 2 4`` runs each scenario with that many control-plane processes on one Redis
(``--cluster``: on a local 6-node Redis Cluster, see :mod:`propius.local_cluster`), the load spread
over them; the medians give each N's efficiency per shard against N=1, and each run says how busy each
part was (CPU seconds per wall second: a control plane, a load process, the busiest Redis node from its
``INFO cpu``) so that what saturates first is named.

    python benchmarks/bind_throughput.py --clients 10000 --shards 1 2 --cluster --load-procs 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import psutil
import redis

from clients.transport import open_channel
from clients.transport_mux import MultiplexedClients
from control_plane.redis_client import is_cluster_url, node_url
from propius.certs import init_certs
from propius.config import ChannelSecurity
from propius.local_cluster import local_cluster
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SECURITIES = ("plaintext", "mtls")


def client_security(security: str, certs: Path | None) -> ChannelSecurity:
    """A load client's channel: plaintext, or mutual TLS with the ``bench`` certificate in ``certs``."""
    if security == "plaintext" or certs is None:
        return ChannelSecurity(insecure=True)
    return ChannelSecurity(tls_ca=certs / "ca.crt", tls_cert=certs / "bench.crt", tls_key=certs / "bench.key")


def server_security_env(security: str, certs: Path | None) -> dict[str, str]:
    """The control plane's ``PROPIUS_*`` transport settings."""
    if security == "plaintext" or certs is None:
        return {"PROPIUS_INSECURE": "1"}
    return {"PROPIUS_INSECURE": "0", "PROPIUS_TLS_CERT": str(certs / "server.crt"),
            "PROPIUS_TLS_KEY": str(certs / "server.key"), "PROPIUS_TLS_CA": str(certs / "ca.crt"),
            "PROPIUS_TLS_REQUIRE_CLIENT_CERT": "1"}


def start_control_plane(redis_url: str, prefix: str, port: int, data_dir: Path, shard: int,
                        security_env: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PROPIUS_KEY_PREFIX": prefix, "PROPIUS_CLIENT_TTL_S": "600", "PROPIUS_AUTH": "open",
           **security_env}
    command = [sys.executable, "-m", "propius.cli", "up", "--redis-url", redis_url, "--port", str(port),
               "--data-dir", str(data_dir), "--database-url", f"sqlite:///{data_dir / 'propius.db'}",
               "--no-verbose"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(data_dir / f"shard-{shard}.log", "w"))  # noqa: SIM115


async def wait_ready(address: str, security: ChannelSecurity, timeout_s: float = 30) -> None:
    async with open_channel(address, security, options=[]) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout_s)


async def register_jobs(address: str, n_clients: int, n_jobs: int, security: ChannelSecurity) -> None:
    """K jobs with one open round each, with enough slots for every client (over-selection 1.0)."""
    demand = -(-n_clients // n_jobs)
    async with open_channel(address, security, options=[]) as channel:
        jobs_stub = pb_grpc.JobServiceStub(channel)
        for j in range(n_jobs):
            spec = JobSpec.parse({"name": f"bench-{j}", "demand": demand, "over_selection": 1.0,
                                  "requirements": {"public": {"cpu_f": {"min": j}}}})
            reply = await jobs_stub.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()))
            await jobs_stub.StartRound(pb.StartRoundRequest(job_id=reply.job_id, job_token=reply.job_token))


async def wait_offers(address: str, n_jobs: int, security: ChannelSecurity, timeout_s: float = 30) -> None:
    """Until a probe client (eligible for every job; it accepts nothing) is offered a round there."""
    profile = pb.ClientProfile(client_id=f"probe-{uuid.uuid4().hex}", device_class="edge",
                               numeric={"cpu_f": float(n_jobs), "ram": 8.0})
    async with open_channel(address, security, options=[]) as channel:
        stub = pb_grpc.ClientServiceStub(channel)
        deadline = time.monotonic() + timeout_s
        while not (await stub.CheckIn(pb.CheckInRequest(profile=profile, wait_s=0.5, max_offers=1))).offers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} offered no round in {timeout_s} s")


async def load(n_clients: int, n_jobs: int, concurrency: int, addresses: list[str], transport: str,
               security: ChannelSecurity) -> dict:
    """One load process: each client checks in, then accepts its first offer (the next on round_full).

    ``unary``: one CheckIn and one Accept RPC per client. ``mux``: the process is a client daemon hosting
    its clients, whose calls share one Multiplex stream per control plane (what ``propius-client`` does).
    """
    channels = [open_channel(a, security, options=[]) for a in addresses]
    stubs = [MultiplexedClients(c) if transport == "mux" else pb_grpc.ClientServiceStub(c) for c in channels]
    checkin_ms: list[float] = []
    accept_ms: list[float] = []
    outcomes: dict[str, int] = {}
    semaphore = asyncio.Semaphore(concurrency)

    async def client(i: int) -> None:
        stub = stubs[i % len(stubs)]
        profile = pb.ClientProfile(client_id=uuid.uuid4().hex, device_class="edge",
                                   numeric={"cpu_f": float(n_jobs), "ram": 8.0})
        async with semaphore:
            t0 = time.perf_counter()
            checkin = await stub.CheckIn(pb.CheckInRequest(profile=profile, wait_s=0, max_offers=4))
            checkin_ms.append((time.perf_counter() - t0) * 1000)
            reason = "no_offer"
            for offer in checkin.offers:
                t1 = time.perf_counter()
                accept = await stub.Accept(pb.AcceptRequest(client_id=checkin.client_id,
                                                            session_token=checkin.session_token,
                                                            offer_id=offer.offer_id))
                accept_ms.append((time.perf_counter() - t1) * 1000)
                reason = "bound" if accept.bound else accept.reason
                if accept.bound:
                    break
            outcomes[reason] = outcomes.get(reason, 0) + 1

    cpu0 = time.process_time()
    started, started_unix = time.perf_counter(), time.time()
    await asyncio.gather(*(client(i) for i in range(n_clients)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    for stub in stubs:
        if isinstance(stub, MultiplexedClients):
            await stub.close()
    for channel in channels:
        await channel.close()
    return {"wall_s": wall, "started_unix": started_unix, "ended_unix": started_unix + wall, "cpu_s": cpu,
            "outcomes": outcomes, "checkin_ms": checkin_ms, "accept_ms": accept_ms}


def worker_main(args: argparse.Namespace) -> None:
    """A load process started by main(): prints its raw measurements as JSON on stdout."""
    security = client_security(args.security, args.certs)
    print(json.dumps(asyncio.run(load(args.clients[0], args.jobs, args.concurrency, args.address, args.transport[0],
                                      security))))


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by these processes (those that still exist)."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def redis_nodes(url: str) -> list[redis.Redis]:
    """One client per Redis server: the server's, or every node of a cluster."""
    if not is_cluster_url(url):
        return [redis.Redis.from_url(url)]
    cluster = redis.RedisCluster.from_url(node_url(url))
    try:
        return [redis.Redis(host=node.host, port=node.port) for node in cluster.get_nodes()]
    finally:
        cluster.close()


def redis_cpu(url: str) -> dict[str, float]:
    """CPU seconds each Redis server has used so far (``INFO cpu``: user + system, main thread and others)."""
    cpu = {}
    for node in redis_nodes(url):
        info = node.info("cpu")
        cpu[f"{node.connection_pool.connection_kwargs.get('port', 0)}"] = info["used_cpu_user"] + info["used_cpu_sys"]
        node.close()
    return cpu


def delete_prefix(url: str, prefix: str) -> None:
    for node in redis_nodes(url):  # each node's own keys (a cluster's replicas answer READONLY: skipped)
        keys = list(node.scan_iter(match=f"{prefix}:*", count=1000))
        with node.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.delete(key)
            pipe.execute(raise_on_error=False)
        node.close()


def saturated_first(busy: dict[str, float], near: float = 0.8) -> str:
    """The busiest process when it is near one core; else the machine when our processes use nearly all its
    cores; else none of ours (what else runs on the machine limits)."""
    part = max(("control_plane", "load_generator", "redis_node"), key=busy.__getitem__)
    if busy[part] >= near:
        return part
    if busy["machine"] >= near:
        return f"machine (our processes use {busy['machine']} of its cores)"
    return f"none (busiest: {part} at {busy[part]} of a core)"


def run_scenario(n: int, args: argparse.Namespace, addresses: list[str], server_pids: list[int]) -> dict:
    security = client_security(args.security_now, args.certs)

    async def prepare() -> None:
        for address in addresses:
            await wait_ready(address, security)
        await register_jobs(addresses[0], n, args.jobs, security)
        for address in addresses:  # every shard's offer view knows the open rounds before the load starts
            await wait_offers(address, args.jobs, security)

    asyncio.run(prepare())
    per = -(-n // args.load_procs)
    workers = [
        subprocess.Popen([sys.executable, __file__, "--worker", "--clients", str(min(per, n - i * per)),
                          "--jobs", str(args.jobs), "--concurrency", str(args.concurrency // args.load_procs),
                          "--transport", args.transport_now, "--security", args.security_now,
                          *(["--certs", str(args.certs)] if args.certs else []),
                          "--address", *addresses], stdout=subprocess.PIPE, text=True)
        for i in range(args.load_procs)
    ]
    per_plane0, redis_cpu0 = [cpu_seconds([pid]) for pid in server_pids], redis_cpu(args.redis_url)
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    parts = [json.loads(worker.communicate()[0]) for worker in workers]
    wall_with_startup = time.perf_counter() - started
    # From the first client's check-in to the last client's accept, across the load processes (their
    # interpreter start-up is not binding work; it is reported apart).
    wall = max(part["ended_unix"] for part in parts) - min(part["started_unix"] for part in parts)
    per_plane = [cpu_seconds([pid]) - before for pid, before in zip(server_pids, per_plane0, strict=True)]
    server_cpu = sum(per_plane)
    per_node = {node: cpu - redis_cpu0.get(node, 0.0) for node, cpu in redis_cpu(args.redis_url).items()}
    redis_total = sum(per_node.values())
    load_cpu = sum(part["cpu_s"] for part in parts)
    # Busy: CPU seconds per wall second of the busiest process of each part; a part near 1.0 is saturated
    # (each is one event loop or, for Redis, one main thread)
    busy = {"control_plane": round(max(per_plane) / wall, 2),
            "load_generator": round(max(part["cpu_s"] / part["wall_s"] for part in parts), 2),
            "redis_node": round(max(per_node.values()) / wall, 2),
            "machine": round((server_cpu + load_cpu + redis_total) / (wall * (os.cpu_count() or 1)), 2)}
    outcomes: dict[str, int] = {}
    for part in parts:
        for reason, count in part["outcomes"].items():
            outcomes[reason] = outcomes.get(reason, 0) + count
    checkins = [v for part in parts for v in part["checkin_ms"]]
    accepts = [v for part in parts for v in part["accept_ms"]]
    bound = outcomes.get("bound", 0)
    pct = lambda values, q: round(float(np.percentile(values, q)), 3)  # noqa: E731
    return {
        "clients": n, "transport": args.transport_now, "security": args.security_now, "jobs": args.jobs,
        "concurrency": args.concurrency,
        "shards": len(addresses),
        "load_processes": args.load_procs, "wall_s": round(wall, 3),
        "wall_with_process_startup_s": round(wall_with_startup, 3), "binds": bound,
        "binds_per_s": round(bound / wall, 1), "outcomes": outcomes,
        "checkin_ms": {"p50": pct(checkins, 50), "p99": pct(checkins, 99)},
        "accept_ms": {"p50": pct(accepts, 50), "p99": pct(accepts, 99)},
        # CPU milliseconds per bind: what a bind costs, whatever else the machine was doing meanwhile
        "cpu_ms_per_bind": {"control_plane": round(1000 * server_cpu / max(bound, 1), 3),
                            "load_generator": round(1000 * load_cpu / max(bound, 1), 3),
                            "redis": round(1000 * redis_total / max(bound, 1), 3)},
        "busy": busy, "saturated_first": saturated_first(busy), "redis_nodes": len(per_node),
        "loadavg_1m": {"before": round(load0, 2), "after": round(os.getloadavg()[0], 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--shards", type=int, nargs="+", default=[1],
                        help="control-plane processes sharing Redis; several values: one run each")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--cluster", action="store_true",
                        help="run on a local 6-node Redis Cluster started for the benchmark (not --redis-url)")
    parser.add_argument("--load-procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--transport", choices=["mux", "unary"], nargs="+", default=["mux"],
                        help="mux: each load process multiplexes its clients' calls on one stream, like "
                             "propius-client; unary: one RPC per call")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (transport, N); medians are reported")
    parser.add_argument("--tls", action="store_true", help="run each scenario in plaintext and with mutual TLS, "
                                                           "side by side, and report the cost of TLS per bind")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bind_throughput.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--security", choices=SECURITIES, default="plaintext", help=argparse.SUPPRESS)
    parser.add_argument("--certs", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return

    with contextlib.ExitStack() as stack:
        if args.cluster:
            args.redis_url = stack.enter_context(local_cluster()).url
        run_all(args)


def run_all(args: argparse.Namespace) -> None:
    for node in redis_nodes(args.redis_url):
        node.ping()
    if args.tls:  # one CA for the whole run; the load's client certificate is `bench`
        args.certs = Path(tempfile.mkdtemp(prefix="propius-bench-certs-"))
        init_certs(args.certs, clients=["bench"])
    results = []
    for transport in args.transport:
        for n in args.clients:
            securities = SECURITIES if args.tls else SECURITIES[:1]  # --tls: both, side by side, same N and run
            for shards, run, security in ((shards, run, security) for shards in args.shards
                                          for run in range(args.repeat) for security in securities):
                args.security_now, args.shards_now = security, shards
                result = run_once(n, transport, args)
                result["run"] = run
                results.append(result)
                print(f"N={n} {transport} {security} K={args.jobs} shards={shards} "
                      f"load procs={args.load_procs} run {run + 1}/{args.repeat}: {result['binds_per_s']:.1f} binds/s, "
                      f"check-in p50 {result['checkin_ms']['p50']} ms p99 {result['checkin_ms']['p99']} ms, "
                      f"accept p50 {result['accept_ms']['p50']} ms p99 {result['accept_ms']['p99']} ms, "
                      f"outcomes {result['outcomes']}; CPU ms/bind {result['cpu_ms_per_bind']}; "
                      f"busy {result['busy']} (first: {result['saturated_first']}); "
                      f"load avg {result['loadavg_1m']}", flush=True)
    summary = summarize(results)
    for row in summary:
        print(f"median of {row['runs']} runs, N={row['clients']} {row['transport']} {row['security']} "
              f"shards={row['shards']}: {row['binds_per_s']} binds/s "
              f"(per-shard efficiency vs 1 shard: {row['efficiency_per_shard']}), "
              f"check-in p50 {row['checkin_ms']['p50']} p99 {row['checkin_ms']['p99']} ms, "
              f"accept p50 {row['accept_ms']['p50']} p99 {row['accept_ms']['p99']} ms, "
              f"control-plane CPU {row['control_plane_cpu_ms_per_bind']} ms/bind")
    costs = tls_costs(summary)
    for cost in costs:
        print(f"TLS cost, N={cost['clients']} {cost['transport']}: binds/s x{cost['binds_per_s_ratio']}, "
              f"control-plane CPU +{cost['control_plane_cpu_ms_per_bind']} ms/bind, "
              f"load-generator CPU +{cost['load_generator_cpu_ms_per_bind']} ms/bind")
    report = {"benchmark": "bind_throughput", "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "command": " ".join(sys.argv), "redis_url": args.redis_url, "medians": summary, "tls_cost": costs,
              "runs": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


def run_once(n: int, transport: str, args: argparse.Namespace) -> dict:
    """One scenario on a fresh control plane and key prefix."""
    args.transport_now = transport
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    data_dir = Path(tempfile.mkdtemp(prefix="propius-bench-"))
    ports = [free_port() for _ in range(args.shards_now)]
    addresses = [f"127.0.0.1:{port}" for port in ports]
    processes = []
    try:
        for i, port in enumerate(ports):  # one after the other: shards share the database's schema creation
            processes.append(start_control_plane(args.redis_url, prefix, port, data_dir, i,
                                                 server_security_env(args.security_now, args.certs)))
            asyncio.run(wait_ready(addresses[i], client_security(args.security_now, args.certs)))
        return run_scenario(n, args, addresses, [process.pid for process in processes])
    finally:
        for process in processes:
            process.terminate()
            process.wait(60)
        delete_prefix(args.redis_url, prefix)


def summarize(results: list[dict]) -> list[dict]:
    """Medians per (transport, security, N, shards) over the repeated runs; efficiency per shard against 1."""
    groups: dict[tuple[str, str, int, int], list[dict]] = {}
    for result in results:
        key = (result["transport"], result["security"], result["clients"], result["shards"])
        groups.setdefault(key, []).append(result)
    median = lambda values: round(float(np.median(values)), 3)  # noqa: E731
    single = {key[:3]: median([r["binds_per_s"] for r in runs]) for key, runs in groups.items() if key[3] == 1}
    return [
        {"transport": transport, "security": security, "clients": n, "shards": shards, "runs": len(runs),
         "binds_per_s": median([r["binds_per_s"] for r in runs]),
         "efficiency_per_shard": (round(median([r["binds_per_s"] for r in runs])
                                        / (shards * single[transport, security, n]), 2)
                                  if (transport, security, n) in single else None),
         "busy": {part: median([r["busy"][part] for r in runs]) for part in runs[0]["busy"]},
         "saturated_first": runs[0]["saturated_first"],
         "checkin_ms": {q: median([r["checkin_ms"][q] for r in runs]) for q in ("p50", "p99")},
         "accept_ms": {q: median([r["accept_ms"][q] for r in runs]) for q in ("p50", "p99")},
         "control_plane_cpu_ms_per_bind": median([r["cpu_ms_per_bind"]["control_plane"] for r in runs]),
         "load_generator_cpu_ms_per_bind": median([r["cpu_ms_per_bind"]["load_generator"] for r in runs]),
         "loadavg_1m": [r["loadavg_1m"]["before"] for r in runs]}
        for (transport, security, n, shards), runs in groups.items()
    ]


def tls_costs(summary: list[dict]) -> list[dict]:
    """Per (transport, N) run both ways: mutual TLS against plaintext, in binds/s and CPU ms per bind."""
    rows = {(row["transport"], row["clients"], row["shards"], row["security"]): row for row in summary}
    costs = []
    for (transport, n, shards, security), tls in rows.items():
        plain = rows.get((transport, n, shards, "plaintext"))
        if security == "plaintext" or plain is None:
            continue
        costs.append({
            "transport": transport, "clients": n, "shards": shards, "security": security,
            "binds_per_s_ratio": round(tls["binds_per_s"] / max(plain["binds_per_s"], 1e-9), 3),
            **{key: round(tls[key] - plain[key], 3)
               for key in ("control_plane_cpu_ms_per_bind", "load_generator_cpu_ms_per_bind")},
        })
    return costs


if __name__ == "__main__":
    main()
