"""What a run measured, as one flat JSON-able record.

- JCT: a job's completion minus its arrival; unfinished jobs (horizon reached) are counted in
  ``unfinished`` and left out of the JCT averages.
- Scheduling delay: round open -> the ``demand``-th bind (when the round first holds enough clients to
  close); response collection: from then to the round's close. Averaged over successful rounds.
- Utilization: ``busy / (clients x makespan)``, busy time being every second a client spent on a bound
  task, delivered or not; ``utilization_active`` divides by the clients' online time in the makespan
  instead; ``useful_utilization`` counts delivered tasks only.
- Binds per second over the makespan (first arrival to last completion); wasted handshakes: accepts
  a client-side-selecting client sent to a job it could not serve (ineligible or full).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from propius.simulator.engine import Simulation

__all__ = ["JobResult", "RunMetrics", "summarize"]


@dataclass(frozen=True)
class JobResult:
    name: str
    arrival_s: float
    jct_s: float | None
    rounds_done: int
    attempts: int
    failed_rounds: int


@dataclass(frozen=True)
class RunMetrics:
    workload: str
    policy: str
    mode: str
    clients: int
    seed: int
    avg_jct_s: float
    max_jct_s: float
    unfinished: int
    avg_schedule_s: float
    avg_response_s: float
    rounds: int
    failed_rounds: int
    makespan_s: float
    utilization: float
    utilization_active: float
    useful_utilization: float
    binds: int
    binds_per_s: float
    handshakes: int
    wasted_handshakes: int
    dropped_tasks: int
    events: int
    wall_s: float
    events_per_s: float
    jobs: list[JobResult]

    def to_dict(self) -> dict:
        return asdict(self)


def _online_s(windows: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in windows)


def summarize(sim: Simulation, policy_name: str, wall_s: float) -> RunMetrics:
    jobs = sim.jobs
    start = min(job.workload.arrival_s for job in jobs)
    end = max((job.finished_at for job in jobs if job.finished_at is not None), default=sim.now)
    if any(job.finished_at is None for job in jobs):
        end = sim.now
    makespan = max(end - start, 1e-9)
    results = [
        JobResult(job.workload.name, job.workload.arrival_s,
                  None if job.finished_at is None else job.finished_at - job.workload.arrival_s,
                  job.rounds_done, len(job.history), sum(not r.succeeded for r in job.history))
        for job in jobs
    ]
    jcts = [r.jct_s for r in results if r.jct_s is not None]
    succeeded = [r for job in jobs for r in job.history if r.succeeded]
    online = sum(_online_s(w, start, end) for w in sim.population.windows)
    n = len(sim.population)
    return RunMetrics(
        workload=sim.workload.name, policy=policy_name, mode=sim.config.mode, clients=n, seed=sim.config.seed,
        avg_jct_s=statistics.fmean(jcts) if jcts else float("nan"), max_jct_s=max(jcts, default=float("nan")),
        unfinished=len(jobs) - len(jcts),
        avg_schedule_s=statistics.fmean(r.schedule_s for r in succeeded) if succeeded else float("nan"),
        avg_response_s=statistics.fmean(r.response_s for r in succeeded) if succeeded else float("nan"),
        rounds=sum(len(job.history) for job in jobs), failed_rounds=sum(r.failed_rounds for r in results),
        makespan_s=makespan, utilization=sim.busy_s / (n * makespan),
        utilization_active=sim.busy_s / online if online else 0.0, useful_utilization=sim.useful_s / (n * makespan),
        binds=sim.binds, binds_per_s=sim.binds / makespan, handshakes=sim.handshakes,
        wasted_handshakes=sim.wasted_handshakes, dropped_tasks=sim.dropped, events=sim.events, wall_s=wall_s,
        events_per_s=sim.events / wall_s if wall_s > 0 else 0.0, jobs=results,
    )
