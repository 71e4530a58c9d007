"""One simulated job's round state, and the :class:`~policies.JobView` the policies see of it.

A view holds exactly what the live scheduler's ``job_view`` makes of an ``ActiveJob`` and a
``RoundState`` (``round_state`` builds the latter; the tests check the two agree field by field),
plus the optional observations (task shape, round timings, expected results). It is built directly
rather than through ``job_view`` because that serialises the job's constraints to JSON on every call,
and a simulation rebuilds a view after every bind; it is rebuilt only after the job's state changed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.fifo_lag import view_fields
from control_plane.scheduling.round_timings import RoundTimings
from control_plane.scheduling.rounds import plan_round
from control_plane.scheduling.state import ActiveJob, RoundState, job_view
from policies import JobView
from propius.simulator.workload import WorkloadJob
from propius.specs import JobSpec

__all__ = ["RoundRecord", "SimJob"]


@dataclass(frozen=True)
class RoundRecord:
    round: int
    attempt: int
    opened_at: float
    closed_at: float
    succeeded: bool
    schedule_s: float  # open -> the demand-th bind (or -> close when never reached)
    response_s: float  # the demand-th bind -> close
    binds: int


@dataclass(slots=True, eq=False)
class SimJob:
    index: int
    key: str  # eligibility key
    spec: JobSpec
    workload: WorkloadJob
    active: ActiveJob
    class_bit: int  # the job's eligibility class, as a bit of the clients' class masks
    wake_bit: int  # which waiting clients a free slot of this job wakes
    state: str = "pending"  # pending | open | done
    rounds_done: int = 0
    attempt: int = 0
    token: int = 0  # unique per round attempt: stale events carry an old one
    opened_at: float = 0.0
    deadline_at: float = 0.0
    target: int = 0
    min_results: int = 0
    bound: int = 0  # clients holding a slot (working, or dropped and not yet reaped)
    results: int = 0
    current: Attempt = field(default_factory=lambda: Attempt(0, 0, 0.0, 0))  # the open (or last) attempt
    served: set[int] = field(default_factory=set)  # delivered to this job: its private constraints admit them
    binds: int = 0  # in this attempt
    work_s: float = 0.0  # client-seconds of tasks delivered in this attempt (useful only if it succeeds)
    busy_at_finish: float = 0.0  # the simulation's busy / useful client-seconds when the job finished
    useful_at_finish: float = 0.0
    timings: RoundTimings = field(default_factory=RoundTimings)
    finished_at: float | None = None
    history: list[RoundRecord] = field(default_factory=list)
    view: JobView | None = None  # None: stale, rebuild before the next decision

    @property
    def job_id(self) -> str:
        return self.active.job_id

    @property
    def open_slots(self) -> int:
        return self.target - self.bound if self.state == "open" else 0

    def open_round(self, now: float, token: int) -> None:
        plan = plan_round(self.spec, self.spec.demand, now)
        self.state = "open"
        self.token = token
        self.opened_at = plan.opened_at
        self.deadline_at = plan.deadline_at
        self.target = plan.target
        self.min_results = plan.min_results
        self.bound = self.results = self.binds = 0
        self.work_s = 0.0
        self.current = Attempt(self.rounds_done, self.attempt, now, plan.demand)
        self.view = None

    def finish_round(self, now: float, succeeded: bool) -> None:
        schedule_s, response_s = self.timings.finished(self.current, now)
        self.history.append(RoundRecord(self.rounds_done, self.attempt, self.opened_at, now, succeeded,
                                        schedule_s, response_s, self.binds))
        if succeeded:
            self.rounds_done += 1
            self.attempt = 0
            self.active = dataclasses.replace(self.active, rounds_done=self.rounds_done)
        else:
            self.attempt += 1
        self.current.members.clear()
        self.bound = 0
        self.view = None
        if self.rounds_done >= self.workload.rounds:
            self.state = "done"
            self.finished_at = now
        else:
            self.state = "pending"

    def round_state(self) -> RoundState:
        return RoundState(
            job_id=self.job_id, round=self.rounds_done, attempt=self.attempt, state=self.state,
            demand=self.spec.demand, target=self.target, min_results=self.min_results,
            bound=self.bound, results=self.results, started_at=self.opened_at, deadline_at=self.deadline_at,
            closed_at=0.0, model_digest="", aggregate_digest="",
        )

    def build_view(self, supply: int, fast_task_s: float | None) -> JobView:
        """``job_view(self.active, self.round_state(), supply)`` plus the observations the simulator tracks."""
        if self.view is None:
            lost, fifo_filled = view_fields(self.timings.lost_to_newer_s, self.current)
            self.view = job_view(
                self.active, self.round_state(), supply, model_size_kbit=self.workload.model_size_kbit,
                expected_results=self.current.expected, recent_schedule_s=self.timings.recent_schedule_s,
                recent_response_s=self.timings.recent_response_s, fast_task_s=fast_task_s,
                lost_to_newer_s=lost, fifo_filled_at=fifo_filled,
            )
        return self.view

