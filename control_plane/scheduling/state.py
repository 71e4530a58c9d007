"""The value types the scheduler reasons about: a live job, its current round, and the policies' view of both.

:class:`ActiveJob` and :class:`RoundState` are what the control plane keeps in its caches (read from
SQL and Redis by :mod:`control_plane.jobs` and :mod:`control_plane.hot_state`) and what the simulator
keeps per simulated job; :func:`job_view` turns them into the :class:`~policies.JobView` a policy sees,
the same way for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from policies import JobView
from propius.specs import JobSpec

__all__ = ["FINISHED", "ROUND_FIELDS", "ActiveJob", "RoundState", "job_view"]

FINISHED = frozenset({"completed", "cancelled"})


@dataclass(frozen=True)
class ActiveJob:
    """A registered job: its spec, owner token hash and progress (``rounds_done`` closed rounds)."""

    job_id: str
    spec: JobSpec
    token_hash: str
    registered_at: float
    state: str  # registered | running | completed | cancelled
    rounds_done: int
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    # Serialized once per job, not once per check-in: these go into every offer and every policy view.
    @cached_property
    def eligibility_key(self) -> str:
        return self.spec.requirements.eligibility_key()

    @cached_property
    def private_json(self) -> str:
        return self.spec.requirements.private.to_json()

    @cached_property
    def task_json(self) -> str:
        return self.spec.task.model_dump_json()

    @cached_property
    def spec_json(self) -> str:
        return self.spec.to_json()


ROUND_FIELDS = (
    "round", "attempt", "state", "demand", "target", "min_results", "bound", "results",
    "started_at", "deadline_at", "closed_at", "model_digest", "aggregate_digest",
)


@dataclass(frozen=True)
class RoundState:
    """A job's current round attempt; its string form (:meth:`to_hash`) is the job's Redis round hash."""

    job_id: str
    round: int
    attempt: int
    state: str  # open | closed | failed
    demand: int
    target: int
    min_results: int
    bound: int
    results: int
    started_at: float
    deadline_at: float
    closed_at: float
    model_digest: str
    aggregate_digest: str

    def to_hash(self) -> dict[str, str]:
        return {name: str(getattr(self, name)) for name in ROUND_FIELDS}

    @property
    def open_slots(self) -> int:
        return max(0, self.target - self.bound) if self.state == "open" else 0

    @classmethod
    def from_hash(cls, job_id: str, data: dict[str, str]) -> RoundState | None:
        """The round stored as ``data``; None for an empty hash (the job has no round)."""
        if not data:
            return None
        return cls(
            job_id=job_id,
            round=int(data["round"]),
            attempt=int(data["attempt"]),
            state=data["state"],
            demand=int(data["demand"]),
            target=int(data["target"]),
            min_results=int(data["min_results"]),
            bound=int(data.get("bound", 0)),
            results=int(data.get("results", 0)),
            started_at=float(data["started_at"]),
            deadline_at=float(data["deadline_at"]),
            closed_at=float(data.get("closed_at", 0)),
            model_digest=data.get("model_digest", ""),
            aggregate_digest=data.get("aggregate_digest", ""),
        )


def job_view(job: ActiveJob, state: RoundState, supply: int, **observed: Any) -> JobView:
    """What a policy sees of ``job`` and its round ``state``, with ``supply`` clients in its class and the
    ``observed`` fields a driver tracks (:class:`~policies.JobView`'s optional ones)."""
    spec = job.spec
    return JobView(
        job_id=job.job_id, name=spec.name, owner=spec.owner, registered_at=job.registered_at,
        priority=spec.priority, demand=state.demand, target=state.target, bound=state.bound,
        results=state.results, rounds_total=spec.rounds, rounds_done=job.rounds_done,
        eligibility_key=job.eligibility_key, public=spec.requirements.public, supply=supply,
        work_samples=spec.task.work_samples, execution_timeout_s=spec.execution_timeout_s,
        deadline_at=state.deadline_at, opened_at=state.started_at, **observed,
    )
