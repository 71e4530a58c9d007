"""Clairvoyant bounds for utilization-5jobs: could any scheduler reach the utilization targets?

    python benchmarks/utilization_bound.py [--clients 1500 ...] [--seeds 0 ...] [--makespans 7000 7904]
        [--no-lp] [--out FILE]

A fluid linear-programming relaxation of the simulator's model on the same seeded population. Every
real schedule (any policy, central or not) maps onto a feasible point, so its optimum bounds every
scheduler: a lower bound on the makespan and, for a given makespan T, an upper bound on useful work
(and so on utilization = useful work / (clients x T)). What it keeps: each job runs its rounds one
after another; a round lasting d seconds counts ``demand`` results, each from a distinct eligible
client whose task (download, train, upload) takes at most d; a client works on one task at a time.
What it drops, which is why it is optimistic: over-selection and stragglers, scheduling delay, and
the synchronisation of concurrent rounds (work is only summed per client, not placed in time).

Variables: x[j, k] rounds of job j lasting between tau_k and tau_k+1, and y[j, k, g] results of those
rounds from client group g (same eligibility, task time within one ``--step``; the group's fastest
time is used for capacity, its slowest for useful work, so grouping only loosens the bound).
Needs scipy (HiGHS); the dev install has it. The LP takes minutes, the lockstep plans seconds.

Beside the bound, a reference point from the other side: the shortest *lockstep plan*, a clairvoyant
schedule that is actually realisable in the simulator's model. Every job opens its round at the same
instant every R seconds; each client, knowing its task time t, runs up to floor(R / t) tasks back to
back, for distinct jobs it is eligible for; each job binds exactly ``demand`` clients (no
over-selection waste). The shortest such R is found by bisection on a max-flow (clients -> jobs), in
seconds. A policy whose makespan is near ``rounds x R`` schedules about as well as perfect knowledge
does without staggering rounds of different jobs; the LP's lower makespan needs that staggering.

Also printed, with or without the LP: the critical path (the slowest job's rounds, each lasting at
least until its ``demand``-th fastest eligible client could deliver), a makespan no scheduler beats,
and the binds the successful rounds can make (at most the target, and at most the eligible clients,
per round); their ratio bounds binds/s for any schedule whose rounds do not fail.

    python benchmarks/utilization_bound.py --clients 1200 1500 1800 --seeds 0 1 2 --no-lp \\
        --out benchmarks/results/lockstep_plans.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import maximum_flow

# benchmarks/policies.py shares its name with the ``policies`` package: keep this folder off the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from propius.simulator.population import make_population  # noqa: E402
from propius.simulator.workload import load_workload  # noqa: E402

RESULTS = Path(__file__).parent / "results"
ClientTask = tuple[tuple[bool, ...], float]  # (eligible for each job, seconds per task)
INFEASIBLE = "infeasible: some job has fewer eligible clients than its demand"


def client_tasks(clients: int, seed: int) -> tuple[list[ClientTask], list]:
    """(jobs eligible for, task seconds) of every client eligible for some job, and the workload's jobs."""
    workload = load_workload("utilization-5jobs")
    population = make_population(clients, seed)
    specs = [item.to_job_spec() for item in workload.jobs]
    shapes = {(spec.task.work_samples, item.model_size_kbit) for spec, item in zip(specs, workload.jobs, strict=True)}
    assert len(shapes) == 1, "one task time per client: every job of this workload has the same task shape"
    (work_samples, model_size_kbit), = shapes
    tasks: list[ClientTask] = []
    for client in range(clients):
        eligible = tuple(spec.requirements.public.admits(population.profiles[client])
                         and spec.requirements.private.admits(population.private[client]) for spec in specs)
        if any(eligible):
            tasks.append((eligible, sum(population.task_s(client, work_samples, model_size_kbit))))
    return tasks, workload.jobs


def client_groups(tasks: list[ClientTask], step: float) -> list[dict]:
    grouped: dict[tuple[tuple[bool, ...], int], list[float]] = {}
    for eligible, task_s in tasks:
        grouped.setdefault((eligible, int(task_s // step)), []).append(task_s)
    return [{"eligible": key[0], "fastest": min(times), "slowest": max(times), "size": len(times)}
            for key, times in grouped.items()]


def lockstep_fits(tasks: list[ClientTask], demands: list[int], period: float) -> bool:
    """Whether every job can get ``demand`` distinct clients per period, each client running up to
    floor(period / task) tasks back to back (a max-flow: source -> client -> job -> sink)."""
    clients, jobs = len(tasks), len(demands)
    sink = clients + jobs + 1
    edges: list[tuple[int, int, int]] = [(1 + clients + j, sink, demand) for j, demand in enumerate(demands)]
    for c, (eligible, task_s) in enumerate(tasks):
        edges.append((0, 1 + c, min(int(period // task_s), sum(eligible))))
        edges += [(1 + c, 1 + clients + j, 1) for j, ok in enumerate(eligible) if ok]
    tail, head, capacity = (np.array(column, dtype=np.int32) for column in zip(*edges, strict=True))
    graph = sp.csr_matrix((capacity, (tail, head)), shape=(sink + 1, sink + 1))
    return maximum_flow(graph, 0, sink).flow_value >= sum(demands)


def lockstep_period(tasks: list[ClientTask], demands: list[int], precision: float = 0.1) -> float:
    """The shortest lockstep period, to ``precision`` seconds (see the module docstring)."""
    low, high = 0.0, max(task_s for _, task_s in tasks) * len(demands)
    if not lockstep_fits(tasks, demands, high):
        raise SystemExit(INFEASIBLE)
    while high - low > precision:
        middle = (low + high) / 2
        low, high = (low, middle) if lockstep_fits(tasks, demands, middle) else (middle, high)
    return high


def critical_path_s(tasks: list[ClientTask], demands: list[int], rounds: list[int]) -> float:
    """A makespan no scheduler beats: a job's round lasts at least until its ``demand``-th fastest
    eligible client could deliver (each result from a distinct client, none starting before the round
    opens), and its rounds run one after another."""
    path = 0.0
    for j, (demand, count) in enumerate(zip(demands, rounds, strict=True)):
        eligible = sorted(task_s for ok, task_s in tasks if ok[j])
        if len(eligible) < demand:
            raise SystemExit(INFEASIBLE)
        path = max(path, count * eligible[demand - 1])
    return path


def successful_binds(tasks: list[ClientTask], targets: list[int], rounds: list[int]) -> int:
    """The most binds the successful rounds can make: each binds at most its target, and at most once
    each eligible client."""
    return sum(count * min(target, sum(ok[j] for ok, _ in tasks))
               for j, (target, count) in enumerate(zip(targets, rounds, strict=True)))


class FluidLp:
    def __init__(self, groups: list[dict], jobs: list, step: float, max_round_s: float = 400.0) -> None:
        self.groups, self.jobs = groups, jobs
        self.taus = np.arange(step * int(min(g["fastest"] for g in groups) // step), max_round_s + step, step)
        columns: list[tuple] = [("x", j, k) for j in range(len(jobs)) for k in range(len(self.taus))]
        for j in range(len(jobs)):
            for k in range(len(self.taus)):
                upper = self.taus[k + 1] if k + 1 < len(self.taus) else np.inf
                columns += [("y", j, k, g) for g, group in enumerate(groups)
                            if group["eligible"][j] and group["fastest"] < upper]
        self.columns = columns
        self.index = {column: i for i, column in enumerate(columns)}
        self.makespan_column = len(columns)  # the last variable
        self._build()

    def _build(self) -> None:
        upper_rows: list[list[tuple[int, float]]] = []
        equal_rows: list[tuple[list[tuple[int, float]], float]] = []
        results_of: dict[tuple[int, int], list[int]] = {}
        work_of: dict[int, list[tuple[int, float]]] = {}
        for i, column in enumerate(self.columns):
            if column[0] == "y":
                _, j, k, g = column
                results_of.setdefault((j, k), []).append(i)
                work_of.setdefault(g, []).append((i, self.groups[g]["fastest"]))
                x = self.index[("x", j, k)]
                upper_rows.append([(i, 1.0), (x, -float(self.groups[g]["size"]))])  # one result per client per round
        for j, job in enumerate(self.jobs):
            xs = [self.index[("x", j, k)] for k in range(len(self.taus))]
            equal_rows.append(([(x, 1.0) for x in xs], float(job.rounds)))
            rounds_time = [(x, float(tau)) for x, tau in zip(xs, self.taus, strict=True)]
            upper_rows.append(rounds_time + [(self.makespan_column, -1.0)])  # its rounds run one after another
            for k, x in enumerate(xs):
                equal_rows.append(([(i, 1.0) for i in results_of.get((j, k), [])] + [(x, -float(job.demand))], 0.0))
        for g, work in work_of.items():
            upper_rows.append(work + [(self.makespan_column, -float(self.groups[g]["size"]))])
        self.a_ub, self.b_ub = self._matrix(upper_rows), np.zeros(len(upper_rows))
        self.a_eq = self._matrix([row for row, _ in equal_rows])
        self.b_eq = np.array([b for _, b in equal_rows])

    def _matrix(self, rows: list[list[tuple[int, float]]]) -> sp.csr_matrix:
        r = [n for n, row in enumerate(rows) for _ in row]
        c = [i for row in rows for i, _ in row]
        v = [value for row in rows for _, value in row]
        return sp.csr_matrix((v, (r, c)), shape=(len(rows), len(self.columns) + 1))

    def _solve(self, objective: np.ndarray, makespan: float | None) -> np.ndarray | None:
        bounds = [(0.0, None)] * len(self.columns) + [(0.0, None) if makespan is None else (makespan, makespan)]
        result = linprog(objective, A_ub=self.a_ub, b_ub=self.b_ub, A_eq=self.a_eq, b_eq=self.b_eq,
                         bounds=bounds, method="highs")
        return result.x if result.status == 0 else None

    def min_makespan(self) -> float:
        objective = np.zeros(len(self.columns) + 1)
        objective[self.makespan_column] = 1.0
        solution = self._solve(objective, None)
        if solution is None:  # any makespan works unless a job's demand exceeds its eligible clients
            raise SystemExit(INFEASIBLE)
        return float(solution[self.makespan_column])

    def max_useful_work(self, makespan: float) -> float | None:
        objective = np.zeros(len(self.columns) + 1)
        for i, column in enumerate(self.columns):
            if column[0] == "y":
                objective[i] = -self.groups[column[3]]["slowest"]
        solution = self._solve(objective, makespan)
        return None if solution is None else float(-objective @ solution)


def measure(clients: int, seed: int, step: float, makespans: list[float], lp: bool) -> dict:
    """One population's lockstep plan and, with ``lp``, its fluid-LP bounds, printed and as a record."""
    started = time.perf_counter()
    tasks, jobs = client_tasks(clients, seed)
    demands, counts = [job.demand for job in jobs], [job.rounds for job in jobs]
    period = lockstep_period(tasks, demands)
    rounds = max(counts)
    critical = critical_path_s(tasks, demands, counts)
    binds = successful_binds(tasks, [job.to_job_spec().bind_target(job.demand) for job in jobs], counts)
    report: dict = {"clients": clients, "seed": seed, "lockstep_period_s": period,
                    "lockstep_makespan_s": rounds * period, "critical_path_s": critical,
                    "max_successful_binds": binds, "max_binds_per_s": binds / critical}
    print(f"{clients} clients, seed {seed}: lockstep plan {period:.1f} s per round, makespan {rounds * period:,.0f} s;"
          f" makespan >= {critical:,.0f} s (critical path), binds of successful rounds <= {binds:,},"
          f" so <= {binds / critical:.2f} binds/s")
    if lp:
        fluid = FluidLp(client_groups(tasks, step), jobs, step)
        report |= {"step_s": step, "variables": len(fluid.columns) + 1, "min_makespan_s": fluid.min_makespan(),
                   "useful_work": []}
        print(f"  fluid LP: makespan >= {report['min_makespan_s']:,.0f} s")
        for makespan in makespans:
            work = fluid.max_useful_work(makespan)
            utilization = None if work is None else work / (clients * makespan)
            report["useful_work"].append({"makespan_s": makespan, "max_useful_s": work, "max_utilization": utilization})
            print(f"  makespan {makespan:,.0f} s: useful work <= "
                  + ("infeasible" if work is None else f"{work:,.0f} client-s, utilization <= {utilization:.3f}"))
    report["wall_s"] = round(time.perf_counter() - started, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1500])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--step", type=float, default=2.0, help="seconds per round-duration tier and client group")
    parser.add_argument("--makespans", type=float, nargs="*", default=[7000.0, 7904.0])
    parser.add_argument("--no-lp", action="store_true", help="only the lockstep plans (seconds, not minutes)")
    parser.add_argument("--out", type=Path, default=RESULTS / "utilization_bound.json")
    args = parser.parse_args()
    runs = [measure(clients, seed, args.step, args.makespans, not args.no_lp)
            for clients in args.clients for seed in args.seeds]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
