"""IRS versus FIFO on overlapping and superset eligibility classes (docs/policies.md, the table of that name).

Each run is ``simulate(w, policy, w.clients, 1, config=SimConfig(seed=seed), model=...)`` on the workload
``w`` drawn from ``WorkloadFamily(structure=S, jobs=(6, 12), clients=(2000, 3000), rounds=(10, 60),
demand=(5, 200), availability=A)`` with family seed ``seed``. Prints the average JCT per row and policy (an
unfinished job counts as 1e9 s, so a starved job shows) and writes ``results/irs_classes.json``. One
process, runs one after the other.

    python benchmarks/irs_classes.py                                   # the table: 16 rows x 3 policies
    python benchmarks/irs_classes.py --policies irs --options speed_tiers=false --label "IRS, no tiers"
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# This file shares a folder with ``policies.py``: keep the folder off the import path (the package wins).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from propius.simulator.availability import AvailabilityModel  # noqa: E402
from propius.simulator.engine import SimConfig  # noqa: E402
from propius.simulator.families import WorkloadFamily, generate  # noqa: E402
from propius.simulator.population import PopulationModel  # noqa: E402
from propius.simulator.run import simulate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
UNFINISHED_S = 1e9


def run(availability: str, structure: str, seed: int, policy: str, options: dict[str, Any]) -> dict[str, Any]:
    family = WorkloadFamily(structure=structure, jobs=(6, 12), clients=(2000, 3000), rounds=(10, 60),
                            demand=(5, 200), availability=availability)
    w = generate(family, seed).workload
    metrics, _ = simulate(w, policy, w.clients, 1, config=SimConfig(seed=seed), options=options,
                          model=PopulationModel(availability=AvailabilityModel(mode=availability)))
    jcts = [job.jct_s if job.jct_s is not None else UNFINISHED_S for job in metrics.jobs]
    return {"availability": availability, "structure": structure, "seed": seed, "policy": policy,
            "options": options, "avg_jct_s": statistics.fmean(jcts), "unfinished": metrics.unfinished,
            "failed_rounds": metrics.failed_rounds, "jobs": {job.name: job.jct_s for job in metrics.jobs},
            "wall_s": metrics.wall_s}


def _option(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    return name, {"true": True, "false": False}.get(value.lower(), value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+", default=["fifo", "irs", "propius"])
    parser.add_argument("--options", nargs="*", default=[], type=_option, help="NAME=VALUE for every policy")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4])
    parser.add_argument("--structures", nargs="+", default=["overlapping", "superset"])
    parser.add_argument("--availability", nargs="+", default=["always", "diurnal"])
    parser.add_argument("--out", type=Path, default=RESULTS / "irs_classes.json")
    args = parser.parse_args()
    options = dict(args.options)
    started = time.perf_counter()
    rows = []
    for availability in args.availability:
        for structure in args.structures:
            for seed in args.seeds:
                cells = []
                for policy in args.policies:
                    row = run(availability, structure, seed, policy, options)
                    rows.append(row)
                    cells.append(f"{row['avg_jct_s']:,.0f}" if not row["unfinished"]
                                 else f"{row['unfinished']} jobs unfinished")
                print(f"| {availability}, {structure}, {seed} | " + " | ".join(cells) + " |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"policies": args.policies, "options": options, "rows": rows,
                                    "wall_s": time.perf_counter() - started}, indent=1))
    print(f"wrote {args.out} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
