"""Sharing policies across workload families: does a policy help on workloads nobody tuned it on?

Every policy runs on ``--workloads`` workloads drawn from a family (:mod:`propius.simulator.families`:
``FAMILY`` below, sized for an hour's sweep, with any of its fields replaced by ``--family``; family seeds
``--family-seed`` onwards) at each run seed of ``--seeds`` (the seed of the clients'
traces). For each workload and seed the benchmark compares a policy with FIFO on the same workload and
the same clients:

- the ratio of average JCT to FIFO's, and the ratio of the worst job's JCT to that job's FIFO JCT;
- a job that does not finish within the horizon counts with the time it ran (horizon less arrival),
  and the run is flagged, so no run is silently dropped and no average is NaN;
- where the default policy's average JCT is more than ``--tolerance`` above FIFO's, a one-line reason
  from the breakdown: whichever of scheduling delay, response collection or failed round attempts
  (summed over jobs) grew most against FIFO;
- for each run with a job above 1.5x its FIFO JCT, how much of that job's extra time its rounds measured
  lost to jobs registered after it (``control_plane.scheduling.fifo_lag``): the order's share; and its failed
  round attempts beside FIFO's.

Beside the policies runs FIFO again with a dropped client's slot freed 1 s later (``--no-noise`` leaves it
out): the noise floor, how far one run moves from FIFO when nothing but a timing constant changes. With
``--noise-of``, any policy's noise row is run the same way, and compared with that policy's own run rather
than with FIFO: how far the policy moves from itself.

Simulations run in parallel processes (``--workers``), or on a Ray cluster (``--ray ADDRESS``; Ray comes
with the ``flwr[simulation]`` extra). Prints the tables, writes ``results/policy_robustness.json`` and
``results/policy-robustness.png``.

    python benchmarks/policy_robustness.py                                   # the default sweep
    python benchmarks/policy_robustness.py --workloads 4 --seeds 0 --policies fifo propius   # a smoke run
    python benchmarks/policy_robustness.py --policies fifo propius --profile my-profile.yaml   # compare profiles
    python benchmarks/policy_robustness.py --policies fifo propius --family '{"jobs": [5, 40]}'   # larger workloads

``--suite FILE`` runs several families in one sweep instead of one (``benchmarks/families.yaml``: every family of
docs/policies.md's family table, with its family seeds and run seeds; ``benchmarks/tail_runs.yaml``: the runs of
its tail table, one workload and seed each): each family's tables, then one line per family for the default and
each profile (median, worst run, runs losing, runs with a job above 1.5x, each beside FIFO's noise) and the totals.

    python benchmarks/policy_robustness.py --policies fifo propius --suite benchmarks/families.yaml
    python benchmarks/policy_robustness.py --policies fifo propius --profile my.yaml --suite benchmarks/tail_runs.yaml

A profile (``--profile FILE``, repeatable, or a policy named ``profile:FILE``) runs as the policy
``profile:NAME``; the profile travels inline with each task, so Ray workers need not see the file. The
losses to FIFO are explained for the default policy and for every profile.

``--baseline JSON`` takes FIFO's runs (and its noise row's) from an earlier JSON of this benchmark instead of running
them again, wherever the family parameters, family seed, run seed and horizon match; the rest run as usual. Trying a
profile on the whole suite then costs its own runs only (about half the time beside FIFO). FIFO does not change
while a profile is tuned; a baseline from older simulator code is the caller's to refresh.

    python benchmarks/policy_robustness.py --policies fifo --suite benchmarks/families.yaml --no-noise --out fifo.json
    python benchmarks/policy_robustness.py --policies fifo --profile my.yaml --suite benchmarks/families.yaml \
        --no-noise --baseline fifo.json --out my.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# This file shares a folder with ``policies.py``: keep the folder off the import path (the package wins).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from policies.profile import load_profile  # noqa: E402
from policies.registry import PROFILE_PREFIX  # noqa: E402
from propius.simulator.availability import AvailabilityModel  # noqa: E402
from propius.simulator.engine import SimConfig  # noqa: E402
from propius.simulator.families import WorkloadFamily, generate  # noqa: E402
from propius.simulator.population import PopulationModel  # noqa: E402
from propius.simulator.run import simulate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
POLICIES = ["fifo", "random", "srsf", "las", "fair-share", "irs", "propius"]
DEFAULT = "propius"
# A policy again with a dropped client's slot freed 1 s later: how far a run moves from the policy's own when
# nothing but a timing constant changes. FIFO's is the noise floor every other row is read against.
NOISE_LEASE_S = 1.0
NOISE_SUFFIX = f", lease +{NOISE_LEASE_S:g} s"
NOISE = f"fifo{NOISE_SUFFIX}"
SLOWDOWN = 1.5  # a job slower than this against its FIFO JCT is listed
REUSABLE = ("fifo", NOISE)  # the runs --baseline may supply: the reference, which a profile under tuning leaves alone
# Sized so 40 workloads x 2 seeds x 7 policies fit in about an hour on 2 cores.
FAMILY = WorkloadFamily(jobs=(5, 20), demand=(5, 200), rounds=(10, 100), clients=(2_000, 8_000))


class SuiteFamily(BaseModel):
    """One family of a ``--suite`` file: its parameters over the benchmark's (``FAMILY``), its first family seed,
    how many workloads and which run seeds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: dict[str, Any] = Field(default_factory=dict)
    family_seed: int
    workloads: int = Field(default=40, ge=1)
    seeds: tuple[int, ...] = Field(default=(0, 1), min_length=1)

    @model_validator(mode="after")
    def _family_in_range(self) -> SuiteFamily:
        """Refuse, at construction, parameters the workload generator would refuse."""
        self.drawn_from()
        return self

    def drawn_from(self) -> WorkloadFamily:
        return WorkloadFamily.model_validate({**FAMILY.model_dump(), **self.family})

    def label(self) -> str:
        """Its family seeds and parameters, as a table's two cells."""
        changed = f"`{json.dumps(self.family)}`" if self.family else "the benchmark's"
        return f"{self.family_seed}-{self.family_seed + self.workloads - 1} | {changed}"


def load_suite(path: Path) -> list[SuiteFamily]:
    """The families of a suite file (a YAML list of :class:`SuiteFamily`); ValueError names a bad entry."""
    entries = yaml.safe_load(path.read_text())
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected a non-empty list of families")
    suite = []
    for index, entry in enumerate(entries):
        try:
            suite.append(SuiteFamily.model_validate(entry))
        except ValidationError as error:
            raise ValueError(f"{path}: family {index + 1}: {error}") from None
    return suite


def noise_of(label: str) -> str | None:
    """The policy a noise row re-runs with the longer lease; None for a row that is not one."""
    return label.removesuffix(NOISE_SUFFIX) if label.endswith(NOISE_SUFFIX) else None


def family_arg(text: str) -> dict[str, Any]:
    """``--family``: the fields that replace the benchmark family's; refused naming a bad one."""
    try:
        changed = json.loads(text)
        SuiteFamily(family=changed, family_seed=0)
    except ValueError as error:  # bad JSON, not an object, or a field out of range
        raise argparse.ArgumentTypeError(str(error)) from None
    return changed


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    """One simulation: per job its JCT (censored at the horizon when unfinished) and time breakdown."""
    drawn = generate(WorkloadFamily.model_validate(task["family"]), task["family_seed"])
    model = PopulationModel(availability=AvailabilityModel(mode=drawn.availability), days=task["days"])
    started = time.perf_counter()
    rerun = noise_of(task["policy"])
    policy = load_profile(task["profile"]).policy() if task.get("profile") else rerun or task["policy"]
    config = SimConfig(seed=task["seed"])
    if rerun is not None:
        config = SimConfig(seed=task["seed"], lease_s=config.lease_s + NOISE_LEASE_S)
    metrics, sim = simulate(drawn.workload, policy, drawn.workload.clients, task["seed"], config=config, model=model)
    jobs = []
    for job in sim.jobs:
        ok = [r for r in job.history if r.succeeded]
        jobs.append({
            "name": job.job_id, "finished": job.finished_at is not None,
            "jct_s": (job.finished_at if job.finished_at is not None else sim.now) - job.workload.arrival_s,
            "schedule_s": sum(r.schedule_s for r in ok), "response_s": sum(r.response_s for r in ok),
            "failed_s": sum(r.closed_at - r.opened_at for r in job.history if not r.succeeded),
            "failed_attempts": sum(not r.succeeded for r in job.history),
            "lost_to_newer_s": job.timings.lost_to_newer_s,
        })
    return {**{k: task[k] for k in ("family_seed", "seed", "policy")}, "part": task.get("part", 0),
            "structure": drawn.structure,
            "arrival": drawn.arrival, "clients": drawn.workload.clients, "jobs": jobs,
            "unfinished": metrics.unfinished, "wall_s": time.perf_counter() - started}


def run_all(tasks: list[dict[str, Any]], workers: int, ray_address: str | None,
            progress: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    if ray_address:
        import ray

        ray.init(address=ray_address)
        remote = ray.remote(run_one)
        pending = [remote.remote(t) for t in tasks]
        rows = []
        while pending:
            done, pending = ray.wait(pending)
            for row in ray.get(done):
                progress(row)
                rows.append(row)
        return rows
    with ProcessPoolExecutor(workers) as pool:
        rows = []
        for row in pool.map(run_one, tasks):
            progress(row)
            rows.append(row)
        return rows


def task_key(family: dict[str, Any], family_seed: int, seed: int, policy: str, days: int) -> str:
    """What makes two runs the same simulation: the family's parameters, the family and run seeds, the policy and
    the horizon."""
    return json.dumps([family, family_seed, seed, policy, days], sort_keys=True)


def load_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The runs of ``REUSABLE`` policies in an earlier JSON of this benchmark, by :func:`task_key`."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not {"runs", "days"} <= data.keys():
        raise ValueError(f"{path}: not a JSON of this benchmark with its runs and horizon ('runs', 'days')")
    families = data.get("families") or [data]  # a one-family sweep keeps its family at the top level
    return {task_key(families[row["part"]]["family"], row["family_seed"], row["seed"], row["policy"], data["days"]):
            row for row in data["runs"] if row["policy"] in REUSABLE}


def compare(rows: list[dict[str, Any]], policies: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """policy -> one entry per (workload, seed): ratios to FIFO (a noise row's: to its own policy's run) and the
    breakdown deltas."""
    runs = {(r["policy"], r["family_seed"], r["seed"]): r for r in rows}
    out: dict[str, list[dict[str, Any]]] = {}
    for policy in policies:
        entries = []
        against = noise_of(policy) or "fifo"
        for r in (r for r in rows if r["policy"] == policy):
            base = runs[(against, r["family_seed"], r["seed"])]
            base_jct = {j["name"]: j["jct_s"] for j in base["jobs"]}
            base_failed = {j["name"]: j["failed_attempts"] for j in base["jobs"]}
            avg, base_avg = statistics.fmean(j["jct_s"] for j in r["jobs"]), statistics.fmean(base_jct.values())
            worst_job = max(r["jobs"], key=lambda j: (j["jct_s"] / base_jct[j["name"]], j["name"]))
            worst = (worst_job["jct_s"] / base_jct[worst_job["name"]], worst_job["name"])
            delta = {part: sum(j[part] for j in r["jobs"]) - sum(j[part] for j in base["jobs"])
                     for part in ("schedule_s", "response_s", "failed_s")}
            entries.append({"family_seed": r["family_seed"], "seed": r["seed"], "structure": r["structure"],
                            "arrival": r["arrival"], "clients": r["clients"], "jobs": len(r["jobs"]),
                            "avg_ratio": avg / base_avg, "worst_ratio": worst[0], "worst_job": worst[1],
                            "worst_extra_s": worst_job["jct_s"] - base_jct[worst[1]],
                            "worst_lost_to_newer_s": worst_job["lost_to_newer_s"],
                            "worst_failed_attempts": [worst_job["failed_attempts"], base_failed[worst[1]]],
                            "unfinished": r["unfinished"], "fifo_unfinished": base["unfinished"], "delta_s": delta})
        out[policy] = sorted(entries, key=lambda e: (e["family_seed"], e["seed"]))
    return out


def reason(entry: dict[str, Any]) -> str:
    """Which part of the summed job time grew most against FIFO."""
    names = {"schedule_s": "scheduling delay", "response_s": "response collection", "failed_s": "failed rounds"}
    part, grew = max(entry["delta_s"].items(), key=lambda item: item[1])
    return f"{names[part]} +{grew / max(entry['jobs'], 1):,.0f} s per job"


def quantiles(values: list[float]) -> tuple[float, float, float, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return pick(0.1), statistics.median(ordered), pick(0.9), ordered[-1]


def tables(comparison: dict[str, list[dict[str, Any]]], tolerance: float) -> list[str]:
    lines = ["| policy | avg JCT / FIFO: p10 | median | p90 | worst | worst job / its FIFO JCT: median | worst "
             f"| runs with a job > {SLOWDOWN}x | workloads worse than FIFO by > tolerance "
             "| runs with unfinished jobs |",
             "|---" * 10 + "|"]
    for policy, entries in comparison.items():
        avg, worst = quantiles([e["avg_ratio"] for e in entries]), quantiles([e["worst_ratio"] for e in entries])
        losses, slow = misses(entries, tolerance)
        lines.append(f"| {policy} | {avg[0]:.3f} | {avg[1]:.3f} | {avg[2]:.3f} | {avg[3]:.3f} | {worst[1]:.2f}x "
                     f"| {worst[3]:.2f}x | {slow} of {len(entries)} | {losses} of {len(entries)} "
                     f"| {sum(e['unfinished'] > 0 for e in entries)} |")
    if any(noise_of(p) for p in comparison):
        lines += ["", f"A row `POLICY{NOISE_SUFFIX}` is POLICY again with a dropped client's slot freed "
                  f"{NOISE_LEASE_S:g} s later, compared with POLICY's own run (FIFO's is the noise floor)."]
    for policy in judged(comparison):
        losses = [e for e in comparison[policy] if e["avg_ratio"] > 1 + tolerance]
        lines += ["", f"Workloads where `{policy}` loses to FIFO by more than {tolerance:.0%}:"]
        lines += [f"- family seed {e['family_seed']} (run seed {e['seed']}, {e['structure']}, {e['arrival']}, "
                  f"{e['jobs']} jobs, {e['clients']:,} clients): {e['avg_ratio']:.3f}x FIFO; {reason(e)}"
                  for e in losses] or ["- none"]
        slow = [e for e in comparison[policy] if e["worst_ratio"] > SLOWDOWN]
        lines += ["", f"Runs where a job of `{policy}` takes more than {SLOWDOWN}x its FIFO JCT (the part of its extra "
                  "time that its rounds measured lost to jobs registered after it is the order's):"]
        lines += [f"- family seed {e['family_seed']} (run seed {e['seed']}, {e['structure']}, {e['arrival']}): "
                  f"{e['worst_job']} {e['worst_ratio']:.2f}x, +{e['worst_extra_s']:,.0f} s, of which "
                  f"{e['worst_lost_to_newer_s']:,.0f} s lost to newer jobs; {e['worst_failed_attempts'][0]} failed "
                  f"round attempts (FIFO: {e['worst_failed_attempts'][1]})" for e in slow] or ["- none"]
    return lines


def misses(entries: list[dict[str, Any]], tolerance: float) -> tuple[int, int]:
    """Runs losing to their baseline by more than ``tolerance``, and runs with a job above ``SLOWDOWN`` x its
    baseline JCT."""
    return (sum(e["avg_ratio"] > 1 + tolerance for e in entries), sum(e["worst_ratio"] > SLOWDOWN for e in entries))


def judged(policies: Iterable[str]) -> list[str]:
    """The policies whose losses are explained: the default and every profile, not their noise rows."""
    return [p for p in policies if (p == DEFAULT or p.startswith(PROFILE_PREFIX)) and noise_of(p) is None]


def suite_table(suite: list[SuiteFamily], comparisons: list[dict[str, list[dict[str, Any]]]],
                tolerance: float) -> list[str]:
    """One line per family for the default and each profile, FIFO's noise row in brackets (where it ran), and
    the totals."""
    lines: list[str] = []
    for policy in judged(comparisons[0]):
        lines += ["", f"`{policy}` on each family, `{NOISE}` in brackets:", "",
                  f"| family seeds | family | median | worst run | runs losing > {tolerance:.0%} [noise] "
                  f"| runs with a job > {SLOWDOWN}x [noise] (worst job) |", "|---" * 6 + "|"]
        runs = losing = slow = 0
        noise_losing = noise_slow = 0
        worst_run = worst_job = 0.0
        for part, comparison in zip(suite, comparisons, strict=True):
            entries, noise = comparison[policy], comparison.get(NOISE, [])
            count, noise_count = misses(entries, tolerance), misses(noise, tolerance)
            bracket = [f"[{n}]" if noise else "[-]" for n in noise_count]
            ratios = [e["avg_ratio"] for e in entries]
            job = max(e["worst_ratio"] for e in entries)
            lines.append(f"| {part.label()} | {statistics.median(ratios):.3f} | {max(ratios):.3f} "
                         f"| {count[0]} {bracket[0]} of {len(entries)} | {count[1]} {bracket[1]} of {len(entries)} "
                         f"({job:.2f}x) |")
            runs, losing, slow = runs + len(entries), losing + count[0], slow + count[1]
            noise_losing, noise_slow = noise_losing + noise_count[0], noise_slow + noise_count[1]
            worst_run, worst_job = max(worst_run, max(ratios)), max(worst_job, job)
        lines.append(f"| all | {len(suite)} families | | {worst_run:.3f} | {losing} [{noise_losing}] of {runs} "
                     f"| {slow} [{noise_slow}] of {runs} ({worst_job:.2f}x) |")
    return lines


def plot(comparison: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [p for p in comparison if p != "fifo"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in zip(axes, ("avg_ratio", "worst_ratio"), ("average JCT / FIFO", "worst job / its FIFO JCT"),
                              strict=True):
        ax.boxplot([[e[key] for e in comparison[p]] for p in names], tick_labels=names)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument("--family", type=family_arg, default={}, metavar="JSON",
                        help="family parameters (WorkloadFamily's fields) over the benchmark's, e.g. "
                             "'{\"jobs\": [5, 40], \"clients\": [2000, 20000]}'")
    parser.add_argument("--family-seed", type=int, default=1000, help="first family seed (workload i: this + i)")
    parser.add_argument("--suite", type=Path, metavar="FILE", help="several families in one sweep (a YAML list of "
                        "family, family_seed, workloads, seeds; e.g. benchmarks/families.yaml) in place of --family, "
                        "--family-seed, --workloads and --seeds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="client-trace seeds")
    parser.add_argument("--policies", nargs="+", default=POLICIES, help="policy names, or profile:FILE")
    parser.add_argument("--profile", type=Path, action="append", default=[], help="a policy profile YAML to run "
                        "beside the policies, as profile:NAME (repeatable)")
    parser.add_argument("--days", type=int, default=7, help="simulated horizon")
    parser.add_argument("--tolerance", type=float, default=0.02, help="a loss smaller than this is a tie")
    parser.add_argument("--no-noise", action="store_true", help=f"leave out the noise-floor row ({NOISE!r})")
    parser.add_argument("--noise-of", nargs="+", default=[], metavar="POLICY",
                        help="also run these policies (or profile:NAME) with the lease 1 s longer, each compared with "
                             "its own run")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster instead of local processes")
    parser.add_argument("--baseline", type=Path, metavar="JSON", help="take FIFO's runs (and its noise row's) from "
                        "this earlier output of the benchmark where the same simulation is there")
    parser.add_argument("--out", type=Path, default=RESULTS / "policy_robustness.json")
    args = parser.parse_args()
    profiles = {}  # label -> the profile, inline
    for source in [*args.profile, *(Path(p.removeprefix(PROFILE_PREFIX)) for p in args.policies
                                    if p.startswith(PROFILE_PREFIX))]:
        profile = load_profile(source)
        profiles[f"{PROFILE_PREFIX}{profile.name}"] = profile.model_dump(mode="json")
    policies = ["fifo", *[p for p in args.policies if p != "fifo" and not p.startswith(PROFILE_PREFIX)], *profiles]
    if not args.no_noise:
        policies.append(NOISE)
    unknown = [p for p in args.noise_of if p not in policies]
    if unknown:
        parser.error(f"--noise-of {' '.join(unknown)}: not among the policies run ({', '.join(policies)})")
    policies += [f"{p}{NOISE_SUFFIX}" for p in args.noise_of if f"{p}{NOISE_SUFFIX}" not in policies]
    if args.suite:
        try:
            suite = load_suite(args.suite)
        except (OSError, ValueError) as error:
            parser.error(f"--suite: {error}")
    else:
        suite = [SuiteFamily(family=args.family, family_seed=args.family_seed, workloads=args.workloads,
                             seeds=tuple(args.seeds))]
    drawn = [part.drawn_from().model_dump(mode="json") for part in suite]
    tasks = [{"family": drawn[k], "family_seed": part.family_seed + i, "seed": s, "policy": p, "days": args.days,
              "profile": profiles.get(noise_of(p) or p), "part": k}
             for k, part in enumerate(suite) for i in range(part.workloads) for s in part.seeds for p in policies]
    reused: list[dict[str, Any]] = []
    if args.baseline:
        try:
            stored = load_baseline(args.baseline)
        except (OSError, ValueError, KeyError, IndexError) as error:
            parser.error(f"--baseline: {error}")
        keys = [task_key(t["family"], t["family_seed"], t["seed"], t["policy"], t["days"]) for t in tasks]
        reused = [{**stored[key], "part": t["part"]} for t, key in zip(tasks, keys, strict=True) if key in stored]
        tasks = [t for t, key in zip(tasks, keys, strict=True) if key not in stored]
        print(f"--baseline: {len(reused)} runs taken from {args.baseline}, {len(tasks)} to run", flush=True)
    started = time.perf_counter()
    done = 0

    def progress(row: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        print(f"[{done}/{len(tasks)}] family seed {row['family_seed']} seed {row['seed']} {row['policy']}: "
              f"{row['structure']}, {len(row['jobs'])} jobs, {row['unfinished']} unfinished, {row['wall_s']:.1f} s",
              flush=True)

    rows = reused + run_all(tasks, args.workers, args.ray, progress)
    comparisons = [compare([r for r in rows if r["part"] == k], policies) for k in range(len(suite))]
    lines: list[str] = []
    for part, comparison in zip(suite, comparisons, strict=True):
        lines += [f"\n## family seeds {part.label()}\n"] if len(suite) > 1 else []
        lines += tables(comparison, args.tolerance)
    if len(suite) > 1:
        lines += ["", "## every family", *suite_table(suite, comparisons, args.tolerance)]
    print("\n".join(lines))
    families = [{"family": family, "family_seeds": [part.family_seed, part.family_seed + part.workloads - 1],
                 "seeds": list(part.seeds), "comparison": comparison}
                for part, family, comparison in zip(suite, drawn, comparisons, strict=True)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        **(families[0] if len(suite) == 1 else {"families": families}), "tolerance": args.tolerance,
        "days": args.days, "baseline": str(args.baseline) if args.baseline else None,
        "wall_s": time.perf_counter() - started, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "runs": rows,
    }, indent=1))
    pooled = {p: [e for comparison in comparisons for e in comparison[p]] for p in policies}
    if len(pooled) > 1:  # FIFO alone (a baseline for --baseline) has nothing to plot against FIFO
        plot(pooled, args.out.with_name("policy-robustness.png"))
    print(f"wrote {args.out} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
