"""What one dashboard refresh costs the control plane's event loop, by client population.

An in-process control plane on the real Redis (a fresh key prefix, deleted afterwards) with ``--jobs``
open rounds over ``--classes`` eligibility classes; N clients check in through the plane's own hot-state
path (no gRPC: the load is not what is measured) and the scheduler estimates supply once. Then the
dashboard's state is built ``--repeat`` times (the first parses each client's device class once, later
ones reuse it) and the Prometheus exposition is rendered. Reports milliseconds per build and the JSON's
size; writes JSON.

    python -m benchmarks.dashboard_cost --clients 1000 10000 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import redis

from control_plane.app import ControlPlane
from propius.config import Settings
from propius.specs import ClientProfile, JobSpec

RESULTS = Path(__file__).parent / "results" / "dashboard_cost.json"


async def measure(redis_url: str, clients: int, jobs: int, classes: int, repeat: int) -> dict[str, float]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(redis_url=redis_url, key_prefix=prefix, data_dir=Path(data_dir), port=0,
                            client_ttl_s=600.0, auth="open")
        plane = ControlPlane(settings)
        try:
            await plane.start()
            for i in range(jobs):
                spec = JobSpec.parse({"name": f"job{i}", "demand": 50, "owner": f"owner{i}",
                                      "requirements": {"public": {"ram": {"min": float(i % classes)}}}})
                job, _ = await plane.jobs.register(spec)
                await plane.rounds.start_round(job, 0)
            now = time.time()
            for start in range(0, clients, 1000):
                await asyncio.gather(*(
                    plane.hot.check_in(ClientProfile(client_id=f"c{i}", numeric={"ram": float(i % (classes + 2))}),
                                       now, 600.0, [], 15.0)
                    for i in range(start, min(clients, start + 1000))))
            await plane.view.estimate_supply(settings.client_ttl_s)
            builds = []
            size = 0
            for _ in range(repeat):
                began = time.perf_counter()
                size = len((await plane.dashboard.state(time.time())).model_dump_json())
                builds.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            plane.metrics.exposition()
            metrics_ms = (time.perf_counter() - began) * 1000
        finally:
            await plane.stop(grace_s=0)
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            for at in range(0, len(keys), 500):
                client.delete(*keys[at: at + 500])
            client.close()
    return {"clients": clients, "jobs": jobs, "classes": classes, "first_build_ms": round(builds[0], 1),
            "build_ms_median": round(statistics.median(builds[1:] or builds), 1), "json_bytes": size,
            "metrics_ms": round(metrics_ms, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    rows = []
    for clients in args.clients:
        row = asyncio.run(measure(args.redis_url, clients, args.jobs, args.classes, args.repeat))
        print(json.dumps(row))
        rows.append(row)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"command": "python -m benchmarks.dashboard_cost " + " ".join(
        f"--clients {' '.join(map(str, args.clients))} --jobs {args.jobs} --classes {args.classes}".split()),
        "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
