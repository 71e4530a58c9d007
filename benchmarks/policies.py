"""Sharing policies on trace-driven clients: the published Propius/Venn comparisons, and ours.

1. policy-20jobs, 15,000 clients, every policy, several seeds: average / max JCT, failed rounds.
   Checks: IRS beats FIFO and Random; ``propius`` beats IRS by >= 10 % on every seed, and no job's
   JCT is more than 1.5x its FIFO JCT.
2. utilization-5jobs at 1,200 / 1,500 / 1,800 always-available clients, several seeds: central
   binding vs static partitioning (utilization) and vs client-side random selection (binds per
   second), for the default and for the variants in ``UTILIZATION_VARIANTS``.
3. Ablations: ``propius`` with one ingredient switched off (or on) at a time.
4. Simulator speed: events/s of the runs above; with ``--scale N`` one run on N clients.

Same workload and same client traces (population seed = run seed) for every policy at a seed. Each
run is a child process (``--run-one TASK_JSON``, JSON out on stdout), ``--workers`` at a time.
Writes ``results/policies.json`` and ``results/policies.md``
(the tables) and ``results/policies-jct.png``; prints the tables and the checks.

    python benchmarks/policies.py                    # the full set: 106 runs, tens of minutes
    python benchmarks/policies.py --seeds 0 --no-ablations --no-utilization   # one seed, exp. 1
    python benchmarks/policies.py --breakdown irs --seeds 0   # where each job's JCT goes, one run
    python benchmarks/policies.py --update --no-jct --no-ablations   # re-run only exp. 2, merged into the JSON
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# This file shares its name with the ``policies`` package: keep its own folder off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from propius.simulator.availability import AvailabilityModel  # noqa: E402
from propius.simulator.engine import SimConfig  # noqa: E402
from propius.simulator.metrics import JobResult, RunMetrics  # noqa: E402
from propius.simulator.plots import plot_jct  # noqa: E402
from propius.simulator.population import PopulationModel  # noqa: E402
from propius.simulator.run import simulate  # noqa: E402
from propius.simulator.workload import load_workload  # noqa: E402

RESULTS = Path(__file__).parent / "results"
POLICIES = ["fifo", "random", "srsf", "las", "fair-share", "irs", "propius"]
# Options override the default profile's plug-ins (policies/profiles/default.yaml): -x drops plug-in x, +x adds it.
ABLATIONS: dict[str, dict[str, Any]] = {
    "propius -srsf": {"srsf": False},
    "propius -starvation_bound": {"starvation_bound": False},
    "propius -fifo_lag": {"fifo_lag": False},
    "propius -doom_guard": {"doom_guard": False},
    "propius -straggler_guard": {"straggler_guard": False},
    "propius -fastest_wake": {"fastest_wake": False},
    "propius +availability_aware": {"availability_aware": True},
    "propius +speed_tiers": {"speed_tiers": True},
    "propius +fifo_floor": {"fifo_floor": True},
    "propius +scarce_first": {"class_order": True},
    "propius +longest_first": {"longest_first": True},
    "propius +wait_for_faster": {"wait_for_faster": True},
    "propius +hold_for_tight": {"hold_for_tight": True},
}
# Central-binding variants run beside the default on utilization-5jobs: label -> (policy, options). The `makespan`
# profile (policies/profiles/makespan.yaml) is the objective an operator would pick for a batch of jobs that must all
# finish (docs/policies.md); it runs whole, and without its two plug-ins that hold clients back, to show what they buy.
MAKESPAN = "profile:makespan"
UTILIZATION_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "propius -fastest_wake": ("propius", {"fastest_wake": False}),
    "propius +longest_first": ("propius", {"longest_first": True}),
    "makespan": (MAKESPAN, {}),
    "makespan -hold_for_tight": (MAKESPAN, {"hold_for_tight": False}),
    "makespan -hold_for_tight -wait_for_faster": (MAKESPAN, {"hold_for_tight": False, "wait_for_faster": False}),
}
UTILIZATION_TARGET, BINDS_TARGET = 1.5, 2.0
SCALE_LABEL = "propius @"  # + the client count: the one --scale run


def run_child(task: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--run-one", json.dumps(task)], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    availability = AvailabilityModel(mode=task["availability"])
    metrics, _ = simulate(
        load_workload(task["workload"]), task["policy"], task["clients"], task["seed"],
        config=SimConfig(mode=task["mode"], seed=task["seed"]), options=task["options"],
        model=PopulationModel(availability=availability), label=task["label"],
    )
    return metrics.to_dict()


def breakdown(policy: str, seed: int, clients: int, options: dict[str, Any]) -> list[str]:
    """Where each job's JCT goes: scheduling delay, response collection, failed (retried) attempts."""
    _, sim = simulate(load_workload("policy-20jobs"), policy, clients, seed, config=SimConfig(seed=seed),
                      options=options)
    lines = [f"{policy} {options or ''} seed {seed}, {clients:,} clients: seconds per job",
             "| job | demand | JCT | scheduling | response | failed attempts | failed rounds | their binds |",
             "|---" * 8 + "|"]
    totals = [0.0, 0.0, 0.0, 0.0]
    for job in sim.jobs:
        ok = [r for r in job.history if r.succeeded]
        bad = [r for r in job.history if not r.succeeded]
        jct = (job.finished_at or sim.now) - job.workload.arrival_s
        parts = [jct, sum(r.schedule_s for r in ok), sum(r.response_s for r in ok),
                 sum(r.closed_at - r.opened_at for r in bad)]
        totals = [t + p / len(sim.jobs) for t, p in zip(totals, parts, strict=True)]
        lines.append(f"| {job.job_id} | {job.spec.demand} | " + " | ".join(f"{p:,.0f}" for p in parts)
                     + f" | {len(bad)} | {sum(r.binds for r in bad):,} |")
    lines.append("| mean | | " + " | ".join(f"{t:,.0f}" for t in totals) + " | | |")
    return lines


def task(workload: str, label: str, policy: str, clients: int, seed: int, mode: str = "central",
         options: dict[str, Any] | None = None, availability: str = "diurnal") -> dict[str, Any]:
    return {"workload": workload, "label": label, "policy": policy, "clients": clients, "seed": seed, "mode": mode,
            "options": options or {}, "availability": availability}


def seeds_of(rows: list[dict[str, Any]], labels: Iterable[str]) -> list[int]:
    """The seeds at which some run of one of ``labels`` is in ``rows``."""
    wanted = set(labels)
    return sorted({r["seed"] for r in rows if r["policy"] in wanted})


def merged(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` rows with those of the same run (workload, label, mode, clients, seed) replaced by ``new``."""
    def run_key(row: dict[str, Any]) -> tuple[Any, ...]:
        return row["workload"], row["policy"], row["mode"], row["clients"], row["seed"]

    fresh = {run_key(r) for r in new}
    return [r for r in old if run_key(r) not in fresh] + new


def still_made(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of runs this benchmark still makes: an ablation or variant since dropped is not merged on."""
    labels = {*POLICIES, *ABLATIONS, *UTILIZATION_VARIANTS, "static", "client-random"}
    return [r for r in rows if r["policy"] in labels or r["policy"].startswith(SCALE_LABEL)]


def as_metrics(row: dict[str, Any]) -> RunMetrics:
    """A stored row as RunMetrics; rows written before ``finished`` was recorded get it from ``unfinished``."""
    finished = row.get("finished", len(row["jobs"]) - row["unfinished"])
    return RunMetrics(**{**row, "finished": finished, "jobs": [JobResult(**job) for job in row["jobs"]]})


def jct_table(rows: list[dict[str, Any]], labels: list[str], seeds: list[int]) -> list[str]:
    lines = ["| policy | " + " | ".join(f"avg JCT s{s} (s)" for s in seeds)
             + " | mean | max JCT (s, mean) | failed rounds (mean) | sched. delay (s) | response (s) | binds/s |",
             "|---" * (len(seeds) + 7) + "|"]
    for label in labels:
        mine = [r for r in rows if r["policy"] == label]
        if not mine:
            continue
        by_seed = {r["seed"]: r for r in mine}
        cells = [f"{by_seed[s]['avg_jct_s']:,.0f}" if s in by_seed else "" for s in seeds]
        lines.append(
            f"| {label} | " + " | ".join(cells)
            + f" | {statistics.fmean(r['avg_jct_s'] for r in mine):,.0f}"
            + f" | {statistics.fmean(r['max_jct_s'] for r in mine):,.0f}"
            + f" | {statistics.fmean(r['failed_rounds'] for r in mine):,.0f}"
            + f" | {statistics.fmean(r['avg_schedule_s'] for r in mine):.1f}"
            + f" | {statistics.fmean(r['avg_response_s'] for r in mine):.1f}"
            + f" | {statistics.fmean(r['binds_per_s'] for r in mine):.2f} |"
        )
    return lines


def checks(rows: list[dict[str, Any]], seeds: list[int]) -> list[str]:
    def get(label: str, seed: int) -> dict[str, Any] | None:
        return next((r for r in rows if r["policy"] == label and r["seed"] == seed), None)

    lines = []
    for seed in seeds:
        fifo, rnd, irs, ours = get("fifo", seed), get("random", seed), get("irs", seed), get("propius", seed)
        if not (fifo and irs and ours):
            continue
        gain = 1 - ours["avg_jct_s"] / irs["avg_jct_s"]
        fifo_jct = {j["name"]: j["jct_s"] for j in fifo["jobs"]}
        worst = max((j["jct_s"] / fifo_jct[j["name"]], j["name"]) for j in ours["jobs"]
                    if j["jct_s"] and fifo_jct.get(j["name"]))
        lines.append(
            f"- seed {seed}: IRS < FIFO: {irs['avg_jct_s'] < fifo['avg_jct_s']}, IRS < Random: "
            f"{irs['avg_jct_s'] < rnd['avg_jct_s'] if rnd else 'not run'}; "
            f"propius vs IRS: {gain:+.1%} (target >= +10 %: "
            f"{gain >= 0.10}); worst job vs FIFO: {worst[0]:.2f}x ({worst[1]}; target <= 1.5x: {worst[0] <= 1.5})"
        )
    return lines


def utilization_ratios(rows: list[dict[str, Any]], clients: int, seed: int) -> dict[str, tuple[float, float]]:
    """policy label -> (utilization vs static, binds/s vs client-random) at one client count and seed."""
    mine = [r for r in rows if r["clients"] == clients and r["seed"] == seed]
    base = {r["mode"]: r for r in mine if r["mode"] != "central"}
    static, rnd = base.get("static"), base.get("client-random")
    return {r["policy"] if r["mode"] == "central" else r["mode"]: (
        r["utilization"] / static["utilization"] if static else float("nan"),
        r["binds_per_s"] / rnd["binds_per_s"] if rnd else float("nan")) for r in mine}


def utilization_table(rows: list[dict[str, Any]], counts: list[int], seeds: list[int]) -> list[str]:
    lines = ["| clients | seed | mode | avg JCT (s) | unfinished | makespan (s) | utilization | util. (active) "
             "| busy util. | binds/s | wasted handshakes | util. vs static | binds/s vs client-random |",
             "|---" * 13 + "|"]
    for n in counts:
        for seed in seeds:
            ratios = utilization_ratios(rows, n, seed)
            for r in sorted((r for r in rows if r["clients"] == n and r["seed"] == seed),
                            key=lambda r: (r["mode"] != "central", r["policy"] != "propius")):
                util, binds = ratios[r["policy"] if r["mode"] == "central" else r["mode"]]
                lines.append(f"| {n} | {seed} | {r['mode']} ({r['policy']}) | {r['avg_jct_s']:,.0f} | "
                             f"{r['unfinished']} | {r['makespan_s']:,.0f} | {r['utilization']:.3f} | "
                             f"{r['utilization_active']:.3f} | {r['busy_utilization']:.3f} | {r['binds_per_s']:.2f} | "
                             f"{r['wasted_handshakes']:,} | {util:.2f}x | {binds:.2f}x |")
    return lines


def utilization_checks(rows: list[dict[str, Any]], counts: list[int], seeds: list[int]) -> list[str]:
    """Per central-binding configuration: its ratios at every client count and seed, and the targets met."""
    ratios = {(n, seed): utilization_ratios(rows, n, seed) for n in counts for seed in seeds}
    lines = []
    for label in ["propius", *UTILIZATION_VARIANTS]:
        cells, met, runs = [], 0, 0
        for n in counts:
            per_seed = [ratios[n, seed].get(label) for seed in seeds]
            got = [ratio for ratio in per_seed if ratio is not None]
            if not got:
                continue
            runs += len(got)
            met += sum(util >= UTILIZATION_TARGET and binds >= BINDS_TARGET for util, binds in got)
            cells.append(f"{n:,}: " + " / ".join(f"{u:.2f}x" for u, _ in got) + " util., "
                         + " / ".join(f"{b:.2f}x" for _, b in got) + " binds/s")
        if runs:
            lines.append(f"- {label} (seeds {'/'.join(map(str, seeds))}): " + "; ".join(cells)
                         + f". Both targets (>= {UTILIZATION_TARGET}x, >= {BINDS_TARGET}x) met in {met} of {runs} runs")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--policies", nargs="+", default=POLICIES)
    parser.add_argument("--clients", type=int, default=15_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ablation-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--no-ablations", action="store_true")
    parser.add_argument("--ablations", nargs="+", default=list(ABLATIONS), help="which ablation labels to run")
    parser.add_argument("--no-jct", action="store_true", help="skip experiment 1 (the policy table)")
    parser.add_argument("--no-utilization", action="store_true")
    parser.add_argument("--utilization-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--update", action="store_true",
                        help="merge the runs into the existing results JSON (same run: replaced) before the tables")
    parser.add_argument("--scale", type=int, default=0, help="also one propius run on this many clients")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--breakdown", metavar="POLICY", help="only print where one run's JCT goes (first seed)")
    parser.add_argument("--option", action="append", default=[], help="policy option key=JSON for --breakdown")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)
    parser.add_argument("--from-json", type=Path, help="rebuild the tables from a results JSON instead of running")
    args = parser.parse_args()
    if args.run_one:
        print(json.dumps(run_one(json.loads(args.run_one))))
        return
    if args.breakdown:
        options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.option)}
        print("\n".join(breakdown(args.breakdown, args.seeds[0], args.clients, options)))
        return

    tasks = [] if args.no_jct else [
        task("policy-20jobs", p, p, args.clients, s) for s in args.seeds for p in args.policies]
    if not args.no_ablations:
        tasks += [task("policy-20jobs", label, label.split()[0], args.clients, s, options=options)
                  for s in args.ablation_seeds for label, options in ABLATIONS.items() if label in args.ablations]
    util_counts = load_workload("utilization-5jobs").client_counts
    if not args.no_utilization:
        for n in util_counts:
            for s in args.utilization_seeds:
                tasks += [task("utilization-5jobs", "propius", "propius", n, s, availability="always"),
                          *(task("utilization-5jobs", label, policy, n, s, availability="always", options=options)
                            for label, (policy, options) in UTILIZATION_VARIANTS.items()),
                          task("utilization-5jobs", "static", "fifo", n, s, mode="static", availability="always"),
                          task("utilization-5jobs", "client-random", "fifo", n, s, mode="client-random",
                               availability="always")]
    if args.scale:
        tasks.append(task("policy-20jobs", f"{SCALE_LABEL}{args.scale}", "propius", args.scale, 0))
    if args.from_json:
        rows = json.loads(args.from_json.read_text())
    else:
        with ThreadPoolExecutor(args.workers) as pool:
            rows = list(pool.map(run_child, tasks))
        if args.update and (args.out / "policies.json").exists():
            rows = merged(still_made(json.loads((args.out / "policies.json").read_text())), rows)

    policy_rows = [r for r in rows if r["workload"] == "policy-20jobs" and r["clients"] == args.clients]
    util_rows = [r for r in rows if r["workload"] == "utilization-5jobs"]
    speed_rows = [r for r in rows if r["workload"] == "policy-20jobs"]
    policy_seeds = seeds_of(policy_rows, POLICIES)
    md = [f"Machine: {platform.processor() or platform.machine()}, {args.workers} worker processes. "
          "Client availability and bandwidth: seeded model (propius/simulator/availability.py, population.py), "
          "not the FedScale traces.", "",
          f"### policy-20jobs, {args.clients:,} clients, seeds {policy_seeds}", ""]
    md += jct_table(policy_rows, POLICIES, policy_seeds) + [""] + checks(policy_rows, policy_seeds)
    ablation_seeds = seeds_of(policy_rows, ABLATIONS)
    if ablation_seeds:
        ran = {r["policy"] for r in policy_rows}
        labels = ["propius", "irs", *(label for label in ABLATIONS if label in ran)]
        md += ["", f"### Ablations (policy-20jobs, seeds {ablation_seeds})", ""]
        md += jct_table([r for r in policy_rows if r["seed"] in ablation_seeds], labels, ablation_seeds)
    if util_rows:
        util_seeds = sorted({r["seed"] for r in util_rows})
        md += ["", f"### utilization-5jobs (always-available clients, seeds {util_seeds})", ""]
        md += utilization_checks(util_rows, util_counts, util_seeds) + [""]
        md += utilization_table(util_rows, util_counts, util_seeds)
    md += ["", "### Simulator speed", "", "| run | clients | events | wall (s) | events/s |", "|---|---|---|---|---|"]
    for r in speed_rows:
        if r["policy"] in ("propius", "irs", "fifo") or r["clients"] != args.clients:
            md.append(f"| {r['policy']} seed {r['seed']} | {r['clients']:,} | {r['events']:,} | {r['wall_s']:.1f} | "
                      f"{r['events_per_s']:,.0f} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "policies.json").write_text(json.dumps(rows, indent=1))
    (args.out / "policies.md").write_text("\n".join(md) + "\n")
    plot_jct([as_metrics(r) for r in policy_rows if r["policy"] in POLICIES], args.out / "policies-jct.png",
             f"policy-20jobs, {args.clients:,} clients")
    print("\n".join(md))


if __name__ == "__main__":
    main()
