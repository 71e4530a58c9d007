"""What a run measured, as one flat JSON-able record.

- JCT: a job's completion minus its arrival; unfinished jobs (horizon reached) are counted in
  ``unfinished`` and left out of the JCT averages, which are None (null in JSON, never NaN) when no job
  finished. ``finished`` + ``unfinished`` is the workload's job count.
- Scheduling delay: round open -> the ``demand``-th bind (when the round first holds enough clients to
  close); response collection: from then to the round's close. Averaged over successful rounds.
- Makespan: first arrival to the last completion of a job that finished. Jobs that never finish
  (the horizon is reached) are reported in ``unfinished`` and do not stretch the makespan.
- Utilization: ``useful / (clients x makespan)``, useful time being the task time (bind to delivery)
  of results delivered to rounds that completed, up to the end of the makespan: work thrown away by a
  failed round, by a straggler released at close, or by a dropped client does not count.
  ``utilization_active`` divides the same useful time by the clients' online time in the makespan;
  ``busy_utilization`` counts every second a client spent on a bound task, delivered or not.
- Binds per second: binds of the rounds closed within the makespan, per second of it; wasted
  handshakes: accepts a client-side-selecting client sent to a job it could not serve (ineligible or full).
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
    avg_jct_s: float | None
    max_jct_s: float | None
    finished: int
    unfinished: int
    avg_schedule_s: float | None
    avg_response_s: float | None
    rounds: int
    failed_rounds: int
    makespan_s: float
    utilization: float
    utilization_active: float
    busy_utilization: float
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

    @property
    def unfinished_jobs(self) -> list[str]:
        return [job.name for job in self.jobs if job.jct_s is None]


def _online_s(windows: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in windows)


def summarize(sim: Simulation, policy_name: str, wall_s: float) -> RunMetrics:
    jobs = sim.jobs
    start = min(job.workload.arrival_s for job in jobs)
    finished = [job for job in jobs if job.finished_at is not None]
    last = max(finished, key=lambda job: job.finished_at) if finished else None
    end = last.finished_at if last is not None else sim.now
    busy = last.busy_at_finish if last is not None else sim.busy_s
    useful = last.useful_at_finish if last is not None else sim.useful_s
    makespan = max(end - start, 1e-9)
    results = [
        JobResult(job.workload.name, job.workload.arrival_s,
                  None if job.finished_at is None else job.finished_at - job.workload.arrival_s,
                  job.rounds_done, len(job.history), sum(not r.succeeded for r in job.history))
        for job in jobs
    ]
    jcts = [r.jct_s for r in results if r.jct_s is not None]
    succeeded = [r for job in jobs for r in job.history if r.succeeded]
    binds = sum(r.binds for job in jobs for r in job.history if r.closed_at <= end)
    online = sum(_online_s(w, start, end) for w in sim.population.windows)
    n = len(sim.population)
    return RunMetrics(
        workload=sim.workload.name, policy=policy_name, mode=sim.config.mode, clients=n, seed=sim.config.seed,
        avg_jct_s=statistics.fmean(jcts) if jcts else None, max_jct_s=max(jcts, default=None),
        finished=len(jcts), unfinished=len(jobs) - len(jcts),
        avg_schedule_s=statistics.fmean(r.schedule_s for r in succeeded) if succeeded else None,
        avg_response_s=statistics.fmean(r.response_s for r in succeeded) if succeeded else None,
        rounds=sum(len(job.history) for job in jobs), failed_rounds=sum(r.failed_rounds for r in results),
        makespan_s=makespan, utilization=useful / (n * makespan),
        utilization_active=useful / online if online else 0.0, busy_utilization=busy / (n * makespan),
        binds=binds, binds_per_s=binds / makespan, handshakes=sim.selection.handshakes,
        wasted_handshakes=sim.selection.wasted_handshakes, dropped_tasks=sim.dropped, events=sim.events, wall_s=wall_s,
        events_per_s=sim.events / wall_s if wall_s > 0 else 0.0, jobs=results,
    )
