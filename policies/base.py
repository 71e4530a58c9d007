"""Job-sharing policies: in which order the jobs competing for one client pool are served.

Modelled on the Kubernetes scheduling framework: a policy is a set of named extension points that
the scheduler calls in a fixed order, so a new policy overrides only the points it cares about.

1. ``filter(job, ctx)``: may this job be served right now? Default: yes. A policy uses it to hold
   a job back (a quota, a fairness budget) without knowing how the others are ordered.
2. ``score(job, ctx)``: the one number a policy must define; lower is served first. ``order``
   sorts the filtered jobs by ``(score, registered_at, job_id)``, so ties fall back to FIFO and
   are deterministic.
3. ``rank_for_client(attributes, jobs, ctx)``: optional per-client step. At check-in the scheduler
   passes the jobs this client is eligible for, in the global order; client-aware policies (such as
   Venn's IRS) reorder them here. Default: keep the global order.
4. ``wake_key(job)``: optional. When slots of ``job`` open (a round starts, a client drops out), the
   scheduler wakes a few of the idle clients waiting for work; a policy that returns a key function
   here chooses which (lowest key first, arrival order among equals). Default: None, oldest first.

Policies see frozen :class:`JobView` snapshots and a :class:`SchedulingContext`, never the stores,
and read time only from ``ctx.now``: the same inputs give the same order in the live control plane,
in the simulator and after a restart. A third party adds a policy by shipping one module with a
:class:`Policy` subclass and an entry point (see :mod:`policies.registry`).

Some fields are optional observations (task shape, recent round timings, expected results, a
:class:`ClientEstimate` of the checking-in client). Their defaults mean "not observed", and every
policy must behave sensibly without them: until they are observed (a new job, a new client, a control
plane just restarted) a policy gets the plain behaviour, afterwards the informed one. The simulator
and the live control plane (:mod:`control_plane.observations`) learn them with the same bookkeeping.
One of them costs a pass over the eligible clients and is made only for a policy that asks
(``wants_fastest_fill``): ``fastest_fill_at`` of the head job (:mod:`policies.fastest_fill`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from propius.specs import AttributeValue, Constraints

__all__ = ["ClientEstimate", "JobView", "Policy", "SchedulingContext"]


@dataclass(frozen=True)
class JobView:
    """What a policy may know about one open job, snapshotted by the scheduler for one decision."""

    job_id: str
    name: str
    owner: str
    registered_at: float
    priority: float
    demand: int  # results wanted this round
    target: int  # bind slots this round (demand x over-selection)
    bound: int
    results: int
    rounds_total: int | None  # None: open-ended
    rounds_done: int
    eligibility_key: str  # jobs with equal public constraints share one key
    public: Constraints
    supply: int  # recent eligible clients, estimated by the scheduler
    # Optional observations; the defaults mean "not known".
    model_size_kbit: float = 0.0  # one transfer each way per task
    work_samples: float = 0.0  # sample passes per task (local_steps x 3 x batch_size)
    execution_timeout_s: float = math.inf
    deadline_at: float = math.inf  # when the current round attempt fails if results are short
    expected_results: float | None = None  # results + reliability-weighted bound clients still working
    recent_schedule_s: float | None = None  # smoothed scheduling delay of the job's last rounds
    recent_response_s: float | None = None  # smoothed response-collection time of the job's last rounds
    opened_at: float | None = None  # when the current round attempt opened (RoundState.started_at)
    fast_task_s: float | None = None  # predicted task seconds of this job's fastest speed tier of clients
    fastest_fill_at: float | None = None  # set for the order's head on request: see policies.fastest_fill

    @property
    def open_slots(self) -> int:
        return max(0, self.target - self.bound)

    @property
    def remaining_rounds(self) -> int | None:
        """Rounds still to run, the current one included; None for an open-ended job."""
        if self.rounds_total is None:
            return None
        return max(0, self.rounds_total - self.rounds_done)


@dataclass(frozen=True)
class ClientEstimate:
    """What the control plane has learned about one client from its history; the client never claims it.

    Learned from outcomes the control plane sees anyway (bind, result and lease-expiry times, check-in
    sessions), so a client cannot inflate it. ``None`` means "no history yet".
    """

    s_per_sample: float | None = None  # training seconds per sample pass
    bandwidth_kbps: float | None = None
    reliability: float = 1.0  # estimated P(a bound task delivers before its deadline)
    online_since: float | None = None  # start of the current check-in session
    session_s: float | None = None  # typical length of this client's sessions

    def task_s(self, job: JobView) -> float | None:
        """Predicted seconds for one task of ``job`` (download, train, upload), or None if unknown."""
        if self.s_per_sample is None or self.bandwidth_kbps is None or job.work_samples <= 0:
            return None
        return job.work_samples * self.s_per_sample + 2.0 * job.model_size_kbit / self.bandwidth_kbps

    def available_for_s(self, now: float) -> float | None:
        """Predicted seconds until the current session ends, or None if unknown."""
        if self.online_since is None or self.session_s is None:
            return None
        return self.online_since + self.session_s - now


@dataclass(frozen=True)
class SchedulingContext:
    now: float
    supply_by_class: Mapping[str, int]  # eligibility_key -> recent eligible clients
    seed: int = 0  # for policies that draw pseudo-random orders
    client: ClientEstimate | None = None  # the checking-in client, where its history is tracked
    speed_tiers: tuple[float, ...] = ()  # ascending s_per_sample bounds between speed tiers (fastest first)

    def class_supply(self, job: JobView) -> int:
        """Recent clients of ``job``'s eligibility class (the snapshot's own estimate if not in the map)."""
        return self.supply_by_class.get(job.eligibility_key, job.supply)


class Policy(ABC):
    """A job-sharing policy; subclasses set ``name`` and define ``score``, the rest is optional."""

    name: ClassVar[str]

    def filter(self, job: JobView, ctx: SchedulingContext) -> bool:
        """False for a job the policy does not want served right now."""
        return True

    @abstractmethod
    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        """Lower is served first."""

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        """The global order: filtered jobs by (score, registered_at, job_id)."""
        kept = [job for job in jobs if self.filter(job, ctx)]
        return sorted(kept, key=lambda job: (self.score(job, ctx), job.registered_at, job.job_id))

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        """Reorder the jobs one client is eligible for (given in global order); default keeps it."""
        return list(jobs)

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        """Which waiting clients a free slot of ``job`` wakes first (lowest key); None: oldest first."""
        return None

    @property
    def wants_fastest_fill(self) -> bool:
        """Whether the scheduler should estimate ``fastest_fill_at`` for the head of the order (a pass
        over the eligible clients, so only on request; see :mod:`policies.fastest_fill`)."""
        return False
