"""tinyfed on Propius vs Flower's simulation runtime, side by side on this machine.

    python -m benchmarks.flower [--app propius/examples/tinyfed] [--repeat 1] [--out FILE]

(As a module: run as a file, ``benchmarks/`` comes first on ``sys.path`` and ``benchmarks/policies.py``
would shadow the ``policies`` package the control plane imports.)

Flower: the app's ``run_sim_api.py`` (``run_simulation``, Ray backend, ``num_cpus=1`` per client, 10
nodes). Propius: ``python -m propius.flower run APP`` against a control plane (in this process, on the
machine's Redis or an embedded one) and one client daemon hosting 10 devices, twice: *cold* (the
control plane and the daemon start with the run, so the whole system's start-up counts, as Ray's
does for Flower) and *warm* (a second run on the same daemon, as on a running deployment).

Per run: ``total_s`` from launch to exit (cold: from starting the control plane), ``first_round_s``
from launch until round 1 (train + evaluate) ended (Flower's ``[ROUND 2/3]`` log line), and
``steady_round_s``, the mean of rounds 2.. as the app itself times them (``per_round_s`` of its
``TINYFED_DONE`` line), plus the per-round ``train_loss`` / ``eval_acc`` Flower's strategy logged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

from control_plane.app import ControlPlane
from propius.config import Settings
from propius.embedded import reachable_redis

REPO = Path(__file__).resolve().parents[1]
DEFAULT_APP = REPO / "propius" / "examples" / "tinyfed"
DEFAULT_REDIS = os.environ.get("PROPIUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NODES = 10


def measure(command: list[str], cwd: Path, env: dict[str, str], started: float) -> dict:
    """Run one runtime's process; timestamps of its log lines give the round boundaries."""
    process = subprocess.Popen(command, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    launched = time.monotonic()
    lines: list[tuple[float, str]] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append((time.monotonic(), line))
    code = process.wait()
    ended = time.monotonic()
    text = "".join(line for _, line in lines)
    if code != 0:
        raise RuntimeError(f"{command[:3]} exited with {code}:\n{text[-3000:]}")
    second = next(at for at, line in lines if "[ROUND 2/" in line)
    per_round = json.loads(re.search(r"per_round_s=(\[[^\]]*\])", text).group(1))
    found = lambda name: [round(float(v), 4) for v in re.findall(  # noqa: E731
        rf"Aggregated MetricRecord: \{{[^}}]*'{name}': ([0-9.e-]+)", text)]
    return {
        "total_s": round(ended - started, 2),
        "launch_to_exit_s": round(ended - launched, 2),
        "first_round_s": round(second - launched, 2),
        "steady_round_s": round(statistics.mean(per_round[1:]), 3),
        "per_round_s": per_round,
        "train_loss": found("train_loss"),
        "eval_acc": found("eval_acc"),
    }


def flower_simulation(app: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(app), "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
    return measure([sys.executable, "run_sim_api.py"], app, env, time.monotonic())


async def propius_runs(app: Path, redis_url: str) -> list[dict]:
    """A cold run (control plane and daemon start with it), then a warm one on the same daemon."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        settings = Settings(redis_url=redis_url, key_prefix=prefix, data_dir=Path(folder), port=0,
                            scheduler_period_s=0.2, insecure=True, auth="open")  # loopback, asked for explicitly
        env = {**os.environ, "PROPIUS_REDIS_URL": redis_url, "PROPIUS_KEY_PREFIX": prefix,
               "PROPIUS_FLOWER_APPS": str(app), "PROPIUS_INSECURE": "1"}
        async with ControlPlane(settings) as plane:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "clients.daemon", "--server", plane.address, "--devices", str(NODES),
                 "--log-level", "WARNING"], cwd=REPO, env=env)
            try:
                command = [sys.executable, "-m", "propius.flower", "run", str(app), "--server", plane.address,
                           "--demand", str(NODES)]
                runs = []
                for kind in ("cold", "warm"):
                    began = started if kind == "cold" else time.monotonic()
                    result = await asyncio.to_thread(measure, command, REPO, env, began)
                    runs.append({"runtime": f"propius-{kind}", **result})
                return runs
            finally:
                daemon.terminate()
                daemon.wait(15)
                client = redis.Redis.from_url(redis_url)
                for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                    client.delete(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", type=Path, default=DEFAULT_APP)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "flower.json")
    args = parser.parse_args()
    runs = []
    with reachable_redis(args.redis_url) as redis_url:
        for _ in range(args.repeat):
            runs.append({"runtime": "flower-simulation", **flower_simulation(args.app)})
            runs += asyncio.run(propius_runs(args.app, redis_url))
    summary = {}
    for runtime in ("flower-simulation", "propius-cold", "propius-warm"):
        mine = [r for r in runs if r["runtime"] == runtime]
        summary[runtime] = {key: round(statistics.median(r[key] for r in mine), 3)
                            for key in ("total_s", "first_round_s", "steady_round_s")}
    flower, cold, warm = summary["flower-simulation"], summary["propius-cold"], summary["propius-warm"]
    summary["speedup_total_cold"] = round(flower["total_s"] / cold["total_s"], 2)
    summary["speedup_total_warm"] = round(flower["total_s"] / warm["total_s"], 2)
    summary["steady_round_ratio_warm"] = round(warm["steady_round_s"] / flower["steady_round_s"], 2)
    summary["same_metrics"] = len({json.dumps([r["train_loss"], r["eval_acc"]]) for r in runs}) == 1
    report = {"benchmark": "flower", "app": str(args.app), "nodes": NODES, "cpus": os.cpu_count(),
              "repeat": args.repeat, "summary": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'runtime':<20}{'total s':>10}{'first round s':>15}{'steady s/round':>16}")
    for runtime in ("flower-simulation", "propius-cold", "propius-warm"):
        row = summary[runtime]
        print(f"{runtime:<20}{row['total_s']:>10}{row['first_round_s']:>15}{row['steady_round_s']:>16}")
    print(f"speed-up of the whole run: {summary['speedup_total_cold']}x cold, {summary['speedup_total_warm']}x warm; "
          f"steady-state round ratio (Propius/Flower) {summary['steady_round_ratio_warm']}; "
          f"identical metrics in every run: {summary['same_metrics']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
