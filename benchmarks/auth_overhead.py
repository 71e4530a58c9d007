"""What authentication costs a bind: the same load against a control plane in open mode and with auth on.

A control plane runs as its own process (``propius up``) on the real Redis and a SQLite file. N enrolled
devices, hosted by this process on one Multiplex stream (what ``propius-client`` does), check in once with
nothing to bind (this loads each credential into the plane's cache), then check in and accept an offer of
one job whose round has a slot for each of them. Reported per mode: binds/s, p50/p99 check-in latency and
the control plane's CPU milliseconds per bind; also the cold check-in pass, where (auth on) each device's
credential is read from SQL once. Modes: ``open``; ``keys``, whose rate limits' buckets are in Redis,
shared by every shard (the default: one more Redis call per authenticated call); ``keys-process``, the
buckets in the control plane's process (``shared_rate_limits`` off). Modes alternate, ``--repeat`` runs
each, medians reported. Then the limiter alone: ``--limiter-calls`` sequential token takes of distinct
callers through the shared buckets (the lean Redis pipe, as the control plane calls them) and through
the process's, wall and CPU microseconds per take. Writes ``benchmarks/results/auth_overhead.json``.

    python benchmarks/auth_overhead.py --clients 2000 --concurrency 64 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
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

import grpc
import numpy as np
import psutil

from clients.transport_mux import MultiplexedClients
from control_plane.identity_store import IdentityStore
from control_plane.redis_client import connect
from control_plane.redis_pipe import RedisPipe
from control_plane.shared_rate_limit import SharedRateLimiter
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec

RESULTS = Path(__file__).resolve().parent / "results" / "auth_overhead.json"
MODES = ("open", "keys", "keys-process")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _provision(database_url: str, n: int) -> tuple[str, list[tuple[str, str]]]:
    """An API key and N enrolled devices: (key, [(client id, credential)])."""
    store = IdentityStore.open(database_url)
    now = time.time()
    _, key = store.create_key("bench", ("submit",), now)
    _, token = store.create_enrolment(n, 3600.0, now)
    devices = []
    for _ in range(n):
        client_id = uuid.uuid4().hex
        devices.append((client_id, str(store.enroll(token, client_id, now)[1])))
    store.close()
    return str(key), devices


async def _run(address: str, key: str, devices: list[tuple[str, str]], concurrency: int, pid: int) -> dict:
    job_md = (("authorization", f"Bearer {key}"),) if key else ()
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        mux, jobs = MultiplexedClients(channel), pb_grpc.JobServiceStub(channel)
        semaphore = asyncio.Semaphore(concurrency)
        plane = psutil.Process(pid)

        def device_md(credential: str) -> tuple[tuple[str, str], ...]:
            return ((DEVICE_TOKEN_HEADER, credential),) if credential else ()

        async def check_in(client_id: str, credential: str, latencies: list[float]) -> pb.CheckInResponse:
            profile = pb.ClientProfile(client_id=client_id, numeric={"ram": 8.0})
            async with semaphore:
                started = time.perf_counter()
                reply = await mux.CheckIn(pb.CheckInRequest(profile=profile, wait_s=0), metadata=device_md(credential))
                latencies.append((time.perf_counter() - started) * 1000)
                return reply

        async def timed(coroutines: list) -> tuple[float, float]:
            cpu0, started = sum(plane.cpu_times()[:2]), time.perf_counter()
            await asyncio.gather(*coroutines)
            return time.perf_counter() - started, sum(plane.cpu_times()[:2]) - cpu0

        cold: list[float] = []
        cold_wall, cold_cpu = await timed([check_in(c, t, cold) for c, t in devices])
        spec = JobSpec.parse({"name": "auth-bench", "demand": len(devices), "over_selection": 1.0})
        job = await jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()), metadata=job_md)
        await jobs.StartRound(pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token), metadata=job_md)
        warm: list[float] = []
        bound = 0

        async def bind(client_id: str, credential: str) -> None:
            nonlocal bound
            reply = await check_in(client_id, credential, warm)
            for offer in reply.offers:
                accept = await mux.Accept(pb.AcceptRequest(client_id=client_id, session_token=reply.session_token,
                                                           offer_id=offer.offer_id), metadata=device_md(credential))
                if accept.bound:
                    bound += 1
                    break

        wall, cpu = await timed([bind(c, t) for c, t in devices])
        await mux.close()
    return {"binds": bound, "binds_per_s": round(bound / wall, 1),
            "plane_cpu_ms_per_bind": round(cpu * 1000 / bound, 3),
            "checkin_p50_ms": round(float(np.percentile(warm, 50)), 2),
            "checkin_p99_ms": round(float(np.percentile(warm, 99)), 2),
            "cold_checkins_per_s": round(len(devices) / cold_wall, 1),
            "cold_plane_cpu_ms_per_checkin": round(cold_cpu * 1000 / len(devices), 3)}


def _measure(mode: str, n: int, concurrency: int, redis_url: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        database_url = f"sqlite:///{data / 'propius.db'}"
        if mode != "open":
            key, devices = _provision(database_url, n)
        else:
            key, devices = "", [(uuid.uuid4().hex, "") for _ in range(n)]
        port = _free_port()
        env = {**os.environ, "PROPIUS_KEY_PREFIX": f"authbench{uuid.uuid4().hex[:8]}",
               "PROPIUS_AUTH": "open" if mode == "open" else "keys",
               "PROPIUS_SHARED_RATE_LIMITS": "0" if mode == "keys-process" else "1",
               "PROPIUS_INSECURE": "1",  # plaintext on loopback, asked for explicitly
               "PROPIUS_DEVICE_BURST": "1000", "PROPIUS_AUTH_CACHE_S": "600"}
        command = [sys.executable, "-m", "propius.cli", "up", "--redis-url", redis_url, "--port", str(port),
                   "--data-dir", folder, "--database-url", database_url, "--no-verbose"]
        with open(data / "plane.log", "w") as log:
            plane = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
            try:
                return {"mode": mode, **asyncio.run(_run(f"127.0.0.1:{port}", key, devices, concurrency, plane.pid))}
            finally:
                plane.terminate()
                plane.wait(30)


async def _limiter_cost(redis_url: str, calls: int) -> dict:
    """Microseconds (wall, this process's CPU) per token take, shared in Redis and in the process."""
    redis = connect(redis_url, decode_responses=True, max_connections=8)
    pipe = RedisPipe(redis_url)
    prefix = f"authbench{uuid.uuid4().hex[:8]}"
    costs = {}
    try:
        for scope, store in (("shared", redis), ("process", None)):
            limiter = SharedRateLimiter(store, pipe, prefix, "key", 50.0, 200, 200_000)
            cpu0, started = time.process_time(), time.perf_counter()
            for call in range(calls):
                await limiter.take(f"caller-{call}")
            costs[scope] = {"wall_us_per_take": round((time.perf_counter() - started) * 1e6 / calls, 1),
                            "cpu_us_per_take": round((time.process_time() - cpu0) * 1e6 / calls, 1)}
    finally:
        keys = [key async for key in redis.scan_iter(match=f"{prefix}:*", count=1000)]
        for key in keys:
            await redis.delete(key)
        pipe.close()
        await redis.aclose()
    return costs


def _median(runs: list[dict]) -> dict:
    return {name: (float(np.median([run[name] for run in runs])) if isinstance(value, float) else value)
            for name, value in runs[0].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode, alternating; medians reported")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--limiter-calls", type=int, default=20_000)
    args = parser.parse_args()
    runs = [_measure(mode, args.clients, args.concurrency, args.redis_url)
            for _ in range(args.repeat) for mode in args.modes]
    for run in runs:
        print(json.dumps(run))
    medians = {mode: _median([run for run in runs if run["mode"] == mode]) for mode in args.modes}
    cpu = {mode: median["plane_cpu_ms_per_bind"] for mode, median in medians.items()}
    summary = {"medians": medians}
    if "open" in cpu and "keys" in cpu:
        summary["cpu_ms_per_bind_added_by_auth"] = round(cpu["keys"] - cpu["open"], 3)
    if "keys-process" in cpu and "keys" in cpu:  # a bind is 2 authenticated calls (check-in, accept)
        summary["cpu_ms_per_bind_added_by_shared_limits"] = round(cpu["keys"] - cpu["keys-process"], 3)
    summary["limiter"] = asyncio.run(_limiter_cost(args.redis_url, args.limiter_calls))
    print(json.dumps(summary))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"command": " ".join(sys.argv), "machine": platform.platform(),
                                   "cpus": os.cpu_count(), "args": vars(args), "runs": runs, **summary}, indent=2))


if __name__ == "__main__":
    main()
