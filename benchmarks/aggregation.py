"""Aggregation throughput: fold N updates of a P-parameter float32 model through the data plane.

Two paths, both on the real Redis:
- ``inprocess``: RoundAggregator.add directly (validate + idempotency claim in Redis + fold), i.e. the
  data plane's own cost;
- ``grpc``: the full path — a control plane in its own process (``propius up``), clients binding and
  streaming their updates over gRPC loopback (UploadUpdate, 1 MiB chunks) while the round folds them.

Payloads are encoded once up front and reused (encoding is the client's cost, not aggregation's).
Reports GB/s of update bytes aggregated (bytes / wall time of all uploads + finalize), per-update
latency, and peak RSS for a small and a large client count, to show memory does not grow with clients.

    python benchmarks/aggregation.py --clients 100 --params 25000000
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

import grpc
import numpy as np
import redis
import redis.asyncio as aioredis

from data_plane.aggregator import RoundAggregator
from data_plane.tensors import decode, encode
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import CHUNK_BYTES, channel_options
from propius.specs import JobSpec


def model_of(params: int, seed: int) -> dict[str, np.ndarray]:
    """A model split like a real one: a few big weight matrices and small biases."""
    rng = np.random.default_rng(seed)
    bias = min(1000, params // 10)
    sizes = [params // 2, params // 4, params // 8]
    sizes.append(params - sum(sizes) - bias)
    tensors = {f"layer{i}.weight": rng.standard_normal(n, dtype=np.float32) for i, n in enumerate(sizes)}
    tensors["head.bias"] = rng.standard_normal(bias, dtype=np.float32)
    return tensors


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


async def in_process(redis_url: str, payloads: list[bytes], clients: int) -> dict:
    client = aioredis.Redis.from_url(redis_url)
    namespace = f"bench{uuid.uuid4().hex[:8]}:{{job:agg}}"
    aggregator = RoundAggregator(client, namespace, 0, 0, max_update_bytes=4 << 30)
    latencies = []
    rss_before = rss_mb()
    started = time.perf_counter()
    for i in range(clients):
        t0 = time.perf_counter()
        await aggregator.add(f"client-{i}", payloads[i % len(payloads)], float(10 + i % 7))
        latencies.append((time.perf_counter() - t0) * 1000)
    await aggregator.finalize()
    wall = time.perf_counter() - started
    await aggregator.discard()
    await client.aclose()
    nbytes = sum(len(payloads[i % len(payloads)]) for i in range(clients))
    return {"path": "inprocess", "clients": clients, "bytes": nbytes, "wall_s": round(wall, 3),
            "gb_per_s": round(nbytes / wall / 1e9, 3),
            "update_ms": {"p50": pct(latencies, 50), "p99": pct(latencies, 99)},
            "peak_rss_mb": round(rss_mb(), 1), "rss_growth_mb": round(rss_mb() - rss_before, 1)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def over_grpc(address: str, payloads: list[bytes], model: bytes, clients: int, concurrency: int) -> dict:
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
            payload = payloads[i % len(payloads)]

            def messages():
                yield pb.UploadUpdateRequest(client_id=client_id, session_token=session, job_id=job_id, round=0,
                                             num_samples=float(10 + i % 7), data=payload[:CHUNK_BYTES])
                view = memoryview(payload)
                for start in range(CHUNK_BYTES, len(payload), CHUNK_BYTES):
                    yield pb.UploadUpdateRequest(data=bytes(view[start: start + CHUNK_BYTES]))

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
            "upload_ms": {"p50": pct(latencies, 50), "p99": pct(latencies, 99)}}


def run_grpc(redis_url: str, payloads: list[bytes], model: bytes, clients: int, concurrency: int) -> dict:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    data_dir = Path(tempfile.mkdtemp(prefix="propius-agg-"))
    port = free_port()
    # Bound clients here upload without heart-beating: a long lease stands in for their heartbeats.
    env = {**os.environ, "PROPIUS_KEY_PREFIX": prefix, "PROPIUS_MAX_UPDATE_BYTES": str(4 << 30), "PROPIUS_LEASE_S": "3600"}
    server = subprocess.Popen(
        [sys.executable, "-m", "propius.cli", "up", "--redis-url", redis_url, "--port", str(port),
         "--data-dir", str(data_dir), "--no-verbose"], env=env, stdout=subprocess.DEVNULL,
        stderr=open(data_dir / "server.log", "w"))  # noqa: SIM115
    try:
        result = asyncio.run(over_grpc(f"127.0.0.1:{port}", payloads, model, clients, concurrency))
        result["server_peak_rss_mb"] = round(vm_hwm_mb(server.pid), 1)
    finally:
        server.terminate()
        server.wait(30)
        r = redis.Redis.from_url(redis_url)
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i: i + 500])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--small", type=int, default=10, help="client count for the memory comparison")
    parser.add_argument("--params", type=int, default=25_000_000)
    parser.add_argument("--distinct", type=int, default=4, help="distinct payloads, reused round-robin")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent uploads on the grpc path")
    parser.add_argument("--paths", nargs="+", default=["inprocess", "grpc"], choices=["inprocess", "grpc"])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/aggregation.json"))
    args = parser.parse_args()

    # Correctness first, on a small model: the folded mean equals numpy's weighted average.
    small = [model_of(1000, s) for s in range(3)]
    check = asyncio.run(_check(args.redis_url, small))

    payloads = [encode(model_of(args.params, seed)) for seed in range(args.distinct)]
    model = encode(model_of(args.params, 99))
    results = []
    for path in args.paths:
        for clients in (args.small, args.clients):
            if path == "inprocess":
                result = asyncio.run(in_process(args.redis_url, payloads, clients))
            else:
                result = run_grpc(args.redis_url, payloads, model, clients, args.concurrency)
            results.append(result)
            print(f"{path:>9} N={clients:>4}: {result['gb_per_s']:.3f} GB/s over {result['bytes'] / 1e9:.2f} GB "
                  f"in {result['wall_s']} s; peak RSS "
                  f"{result.get('peak_rss_mb', result.get('server_peak_rss_mb'))} MB")
    report = {"benchmark": "aggregation", "params": args.params, "update_bytes": len(payloads[0]),
              "cpus": os.cpu_count(), "correctness_max_abs_error": check, "results": results,
              "notes": "payloads pre-encoded and reused; in-process RSS is this process (includes the payloads); "
                       "grpc RSS is the control-plane process (VmHWM)"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


async def _check(redis_url: str, models: list[dict[str, np.ndarray]]) -> float:
    client = aioredis.Redis.from_url(redis_url)
    aggregator = RoundAggregator(client, f"bench{uuid.uuid4().hex[:8]}:{{job:check}}", 0, 0)
    weights = [1.0, 2.5, 7.0]
    for i, (m, w) in enumerate(zip(models, weights, strict=True)):
        await aggregator.add(f"c{i}", encode(m), w)
    aggregate = decode(encode((await aggregator.finalize()).tensors))
    await aggregator.discard()
    await client.aclose()
    error = max(float(np.max(np.abs(aggregate[k] - np.average(np.stack([m[k] for m in models]), axis=0,
                                                               weights=weights)))) for k in models[0])
    assert error < 1e-5, error
    return error


if __name__ == "__main__":
    main()
