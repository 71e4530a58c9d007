"""What one keyed wake costs the control plane's event loop, by how many clients long-poll one shard.

A freed slot wakes the fastest eligible waiters (:class:`control_plane.waiters.WaitQueue`, ranked by the
policy's wake key among at least ``WakeRule.scan_floor`` of the oldest). This drives the live queue
directly, with the key the binder builds for the default policy: ``fastest_wake``'s, IRS's predicted task
time (:func:`policies.irs.fastest_first`) never below a client's known floor, from a
:class:`~control_plane.scheduling.history.ClientHistory` that has seen 90 % of the clients deliver and the
others leave a task unfinished, the narrower-class penalty (:func:`~control_plane.scheduling.wake.
wake_order`) and the job's decliners last (:class:`~control_plane.scheduling.wake.WakeLedger`). Each wake
frees one slot of a job whose class admits about half the waiters; the woken client waits again at the
tail, so the queue keeps its size. Reported per queue size and scan floor: median and p90 milliseconds per
wake. Writes ``benchmarks/results/wake_cost.json``.

    python benchmarks/wake_cost.py --waiters 1000 10000 30000 --floors 4096 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

# This file shares a folder with ``policies.py``: keep the folder off the import path (the package wins).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from control_plane.scheduling.history import ClientHistory  # noqa: E402
from control_plane.scheduling.wake import WakeLedger, WakeRule, wake_order  # noqa: E402
from control_plane.waiters import WaitQueue  # noqa: E402
from policies import JobView  # noqa: E402
from policies.plugins.fastest_wake import FastestWake  # noqa: E402
from propius.specs import Constraints  # noqa: E402

RESULTS = Path(__file__).parent / "results"
WORK_SAMPLES = 600.0  # sample passes per task (10 local steps x 3 x batch 20)
MODEL_KBIT = 20_000.0


def benchmark_view(public: Constraints) -> JobView:
    return JobView(
        job_id="job", name="job", owner="bench", registered_at=0.0, priority=0.0, demand=10, target=13, bound=0,
        results=0, rounds_total=50, rounds_done=0, eligibility_key=public.to_json(), public=public, supply=1000,
        model_size_kbit=MODEL_KBIT, work_samples=WORK_SAMPLES,
    )


async def measure(waiters: int, floor: int, wakes: int, seed: int) -> list[float]:
    """Seconds per 1-slot wake of ``wakes`` wakes, with ``waiters`` clients waiting."""
    rng = random.Random(seed)
    queue = WaitQueue(WakeRule(scan_floor=floor))
    history = ClientHistory()
    attributes = {}
    for i in range(waiters):
        client = f"client-{i}"
        attributes[client] = {"ram": rng.choice([2, 3, 4, 6, 8]), "cpu_f": round(rng.uniform(1.0, 20.0), 1)}
        if rng.random() < 0.9:
            history.delivered(client, rng.uniform(1.0, 30.0), rng.uniform(5.0, 120.0), WORK_SAMPLES, MODEL_KBIT)
        else:
            history.unfinished(client, rng.uniform(60.0, 300.0), WORK_SAMPLES, MODEL_KBIT)
    public = Constraints.model_validate({"ram": {"min": 4}})
    view = benchmark_view(public)
    score = FastestWake().wake_key(view)
    assert score is not None
    ledger: WakeLedger[str, tuple[str, int]] = WakeLedger()
    key = ledger.rank("job", wake_order(lambda client: score(history.estimate(client)), view, lambda: [view],
                                        1.5, lambda classes: lambda client: False))
    waiting = {asyncio.create_task(queue.wait(client, attrs, 3600.0)) for client, attrs in attributes.items()}
    await asyncio.sleep(0)
    seconds = []
    for attempt in range(wakes):
        started = time.perf_counter()
        woken = queue.wake(view.eligibility_key, public, 1, key, ledger.skip(("job", attempt)))
        seconds.append(time.perf_counter() - started)
        for client in woken:
            waiting.add(asyncio.create_task(queue.wait(client, attributes[client], 3600.0)))
        await asyncio.sleep(0)
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waiters", type=int, nargs="+", default=[1_000, 10_000, 30_000])
    parser.add_argument("--floors", type=int, nargs="+", default=[4096, 0], help="WakeRule.scan_floor values")
    parser.add_argument("--wakes", type=int, default=300, help="1-slot wakes measured per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "wake_cost.json")
    args = parser.parse_args()
    rows = []
    print("| waiters | scan floor | ms per wake: median | p90 |\n|---|---|---|---|")
    for waiters in args.waiters:
        for floor in args.floors:
            seconds = sorted(asyncio.run(measure(waiters, floor, args.wakes, args.seed)))
            row = {"waiters": waiters, "scan_floor": floor, "wakes": len(seconds),
                   "median_ms": statistics.median(seconds) * 1e3, "p90_ms": seconds[int(0.9 * len(seconds))] * 1e3}
            rows.append(row)
            print(f"| {waiters:,} | {floor} | {row['median_ms']:.2f} | {row['p90_ms']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "wake_cost", "date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
        "python": platform.python_version(), "work_samples": WORK_SAMPLES, "model_kbit": MODEL_KBIT, "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
