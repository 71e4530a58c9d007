"""Job-sharing policies: in which order the jobs competing for one client pool are served.

Modelled on the Kubernetes scheduling framework: a policy is a set of named extension points that
the scheduler calls in a fixed order, so a new policy overrides only the points it cares about.

1. ``filter(job, ctx)``: may this job be served right now? Default: yes. A policy uses it to hold
   a job back (a quota, a fairness budget) without knowing how the others are ordered.
2. ``score(job, ctx)``: the one number a policy must define; lower is served first. ``order``
   sorts the filtered jobs by ``(score, registered_at, job_id)``, so ties fall back to FIFO and
   are deterministic. A policy whose order is not a per-job score (fair share) overrides ``order``.
3. ``rank_for_client(attributes, jobs, ctx)``: optional per-client step. At check-in the scheduler
   passes the jobs this client is eligible for, in the global order; client-aware policies (such as
   Venn's IRS) reorder or drop them here. Default: keep the global order.
4. ``wake_key(job)``: optional. When slots of ``job`` open (a round starts, a client drops out), the
   scheduler wakes a few of the idle clients waiting for work; a policy that returns a key function
   here chooses which (lowest key first, arrival order among equals). Default: None, oldest first.

Policies see frozen :class:`JobView` snapshots and a :class:`SchedulingContext`, never the stores,
and read time only from ``ctx.now``: the same inputs give the same order in the live control plane,
in the simulator and after a restart. The scheduling core (:mod:`control_plane.scheduling`) calls
them for both. A third party adds a policy by shipping one module with a :class:`Policy` subclass and
an entry point (see :mod:`policies.registry`).

Some fields are optional observations (task shape, recent round timings, expected results, a
:class:`ClientEstimate` of the checking-in client). Their defaults mean "not observed", and every
policy must behave sensibly without them: until they are observed (a new job, a new client, a control
plane just restarted) a policy gets the plain behaviour, afterwards the informed one. The simulator
and the live control plane (:mod:`control_plane.observations`) learn them with the same bookkeeping.
One of them costs a pass over the eligible clients and is made only for a policy that asks
(``wants_fastest_fill``): ``fastest_fill_at`` of the head job
(:mod:`control_plane.scheduling.fastest_fill`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from propius.specs import AttributeValue, Constraints

__all__ = ["ClientEstimate", "JobView", "Policy", "SchedulingContext"]


@dataclass(frozen=True)
class JobView:
    """What a policy may know about one open job, snapshotted by the scheduler for one decision.

    The scheduling core builds one per open round attempt (``control_plane.scheduling.state.job_view``),
    the same way live and in the simulator. Frozen: a policy cannot change what the next decision sees.

    Attributes
    ----------
    job_id : str
        The job's id, unique and stable across restarts.
    name, owner : str
        The job's name and its owner (the tenant, for fair share).
    registered_at : float
        When the job was registered, in the scheduler's clock (seconds); FIFO's order.
    priority : float
        The job spec's ``priority``.
    demand : int
        Results wanted this round; the round closes when it has them.
    target : int
        Bind slots this round: ``ceil(demand x over_selection)``.
    bound : int
        Clients bound to the current round attempt so far.
    results : int
        Results delivered to the current round attempt so far.
    rounds_total : int or None
        Rounds the job will run; None for an open-ended job.
    rounds_done : int
        Rounds completed so far.
    eligibility_key : str
        Jobs with equal public constraints share one key (one eligibility class).
    public : Constraints
        The job's public constraints, matched against a client's attributes.
    supply : int
        Recent eligible clients, estimated by the scheduler.
    model_size_kbit : float, default 0.0
        Model size; one transfer each way per task. 0: not observed.
    work_samples : float, default 0.0
        Sample passes per task (``local_steps x 3 x batch_size``). 0: not known.
    execution_timeout_s : float, default inf
        The spec's execution timeout.
    deadline_at : float, default inf
        When the current round attempt fails if its results are short.
    expected_results : float or None, default None
        Results plus the bound clients still working, each weighted by its learned reliability.
    recent_schedule_s, recent_response_s : float or None, default None
        Smoothed scheduling delay (open to the ``demand``-th bind) and response-collection time (then to
        the close) of the job's last rounds.
    opened_at : float or None, default None
        When the current round attempt opened.
    fast_task_s : float or None, default None
        Predicted task seconds that the fastest speed tier of this job's eligibility class stays within (over
        all clients while too few of the class are observed).
    lost_to_newer_s : float, default 0.0
        Seconds the job's round attempts lost to binds that FIFO would have given them and the order gave to
        jobs registered after it: its closed attempts, and the open one once it filled
        (:mod:`control_plane.scheduling.fifo_lag`).
    fifo_filled_at : float or None, default None
        While the open round is short of ``demand`` clients: when those binds would have filled it (None: not
        yet, even with them). Its loss so far is ``ctx.now - fifo_filled_at``.
    fastest_fill_at : float or None, default None
        When the round could have all its results from the fastest eligible clients, those busy elsewhere
        counted from when they free up. Set only for the head of the order, and only for a policy whose
        ``wants_fastest_fill`` is true.
    """

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
    fast_task_s: float | None = None  # task seconds the fastest speed tier of the job's class stays within
    lost_to_newer_s: float = 0.0  # time its rounds lost to binds taken by jobs registered after it
    fifo_filled_at: float | None = None  # when those binds would have filled the open, unfilled round
    fastest_fill_at: float | None = None  # the order's head, on request (scheduling core)

    @property
    def open_slots(self) -> int:
        """Bind slots still free in the current round attempt.

        Returns
        -------
        int
            ``target - bound``, at least 0.
        """
        return max(0, self.target - self.bound)

    @property
    def remaining_rounds(self) -> int | None:
        """Rounds still to run, the current one included.

        Returns
        -------
        int or None
            ``rounds_total - rounds_done`` (at least 0), or None for an open-ended job.
        """
        if self.rounds_total is None:
            return None
        return max(0, self.rounds_total - self.rounds_done)


@dataclass(frozen=True)
class ClientEstimate:
    """What the control plane has learned about one client from its history; the client never claims it.

    Learned from outcomes the control plane sees anyway (bind, result and lease-expiry times, check-ins),
    so a client cannot inflate it. ``None`` means "no history yet".

    Attributes
    ----------
    s_per_sample : float or None
        Training seconds per sample pass.
    bandwidth_kbps : float or None
        Transfer rate, kbit/s.
    reliability : float, default 1.0
        Estimated probability that a bound task delivers before its deadline.
    online_since : float or None
        Start of the client's current online period (its first check-in of it).
    session_s : float or None
        Typical length of this client's online periods.
    unfinished : tuple of float or None
        ``(seconds, work_samples, model_size_kbit)`` of the last task the client was still working on when its
        round ended: a time it is known to need at least for a task of that shape. Read through
        :meth:`task_floor_s`.

    Examples
    --------
    >>> client = ClientEstimate(s_per_sample=0.05, bandwidth_kbps=10_000.0, online_since=0.0, session_s=3600.0)
    >>> client.available_for_s(now=600.0)
    3000.0
    """

    s_per_sample: float | None = None  # training seconds per sample pass
    bandwidth_kbps: float | None = None
    reliability: float = 1.0  # estimated P(a bound task delivers before its deadline)
    online_since: float | None = None  # start of the current check-in session
    session_s: float | None = None  # typical length of this client's sessions
    unfinished: tuple[float, float, float] | None = None  # (seconds, work_samples, model_size_kbit) left unfinished

    def task_s(self, job: JobView) -> float | None:
        """Predicted seconds for one task of ``job``: download, training and upload.

        Parameters
        ----------
        job : JobView
            The job whose task is predicted; its ``work_samples`` and ``model_size_kbit`` are used.

        Returns
        -------
        float or None
            ``work_samples x s_per_sample + 2 x model_size_kbit / bandwidth_kbps``, or None when the
            client's speed or bandwidth, or the job's task shape, is not known.
        """
        if self.s_per_sample is None or self.bandwidth_kbps is None or job.work_samples <= 0:
            return None
        return job.work_samples * self.s_per_sample + 2.0 * job.model_size_kbit / self.bandwidth_kbps

    def task_floor_s(self, job: JobView) -> float | None:
        """Seconds the client is known to need at least for one task of ``job``: a fact, not a prediction.

        A task is training plus transfers, each proportional to its own size, so a task of ``job``'s shape
        takes at least the unfinished task's seconds times the smaller of the two ratios (sample passes, model
        size). This holds for a client that never delivered, whose :meth:`task_s` is unknown.

        Parameters
        ----------
        job : JobView
            The job whose task is bounded; its ``work_samples`` and ``model_size_kbit`` are used.

        Returns
        -------
        float or None
            The bound, or None without an unfinished task or when either shape is not known.

        Examples
        --------
        >>> from policies.base import JobView
        >>> job = JobView(job_id="j", name="j", owner="", registered_at=0.0, priority=0.0, demand=10, target=13,
        ...               bound=0, results=0, rounds_total=None, rounds_done=0, eligibility_key="", public={},
        ...               supply=100, model_size_kbit=800.0, work_samples=300.0)
        >>> ClientEstimate(unfinished=(90.0, 600.0, 800.0)).task_floor_s(job)  # half the training, same model
        45.0
        """
        if self.unfinished is None:
            return None
        seconds, work_samples, model_size_kbit = self.unfinished
        if min(work_samples, model_size_kbit, job.work_samples, job.model_size_kbit) <= 0:
            return None
        return seconds * min(job.work_samples / work_samples, job.model_size_kbit / model_size_kbit)

    def available_for_s(self, now: float) -> float | None:
        """Predicted seconds until the client's current online period ends.

        Parameters
        ----------
        now : float
            The scheduler's clock.

        Returns
        -------
        float or None
            ``online_since + session_s - now`` (negative once the prediction has failed), or None if unknown.
        """
        if self.online_since is None or self.session_s is None:
            return None
        return self.online_since + self.session_s - now


@dataclass(frozen=True)
class SchedulingContext:
    """Everything a policy may know besides the jobs, for one decision.

    Attributes
    ----------
    now : float
        The scheduler's clock, in seconds; policies read time only from here.
    supply_by_class : Mapping[str, int]
        ``eligibility_key`` -> recent eligible clients.
    seed : int, default 0
        For policies that draw pseudo-random orders.
    client : ClientEstimate or None, default None
        The checking-in client, where its history is tracked; None in the global order.
    speed_tiers : tuple of float, default ()
        Ascending ``s_per_sample`` bounds between speed tiers, fastest tier first, over all learned clients;
        empty until observed.
    class_speed_tiers : Mapping[str, tuple of float], default {}
        ``eligibility_key`` -> the same bounds over the recent clients of that class only, as Venn cuts them:
        a pinned round's fastest tier then holds ``1/k`` of the clients that may serve it. A class is absent
        until enough of its clients are observed. Read them through :meth:`tiers_for`.
    client_counted : bool, default True
        Whether ``supply_by_class`` counts the checking-in client: the estimate is periodic, so a client that came
        since the last one is not in it yet.
    """
    now: float
    supply_by_class: Mapping[str, int]  # eligibility_key -> recent eligible clients
    seed: int = 0  # for policies that draw pseudo-random orders
    client: ClientEstimate | None = None  # the checking-in client, where its history is tracked
    speed_tiers: tuple[float, ...] = ()  # ascending s_per_sample bounds between speed tiers (fastest first)
    class_speed_tiers: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # per eligibility_key
    client_counted: bool = True  # whether supply_by_class counts the checking-in client

    def tiers_for(self, job: JobView) -> tuple[float, ...]:
        """The speed-tier bounds of ``job``'s eligibility class.

        Parameters
        ----------
        job : JobView
            The job whose class is looked up.

        Returns
        -------
        tuple of float
            ``class_speed_tiers[job.eligibility_key]``, or the global ``speed_tiers`` while the class has none.
        """
        return self.class_speed_tiers.get(job.eligibility_key) or self.speed_tiers

    def class_supply(self, job: JobView) -> int:
        """Recent clients of ``job``'s eligibility class.

        Parameters
        ----------
        job : JobView
            The job whose class is looked up.

        Returns
        -------
        int
            ``supply_by_class[job.eligibility_key]``, or the snapshot's own ``job.supply`` if the class is not
            in the map.
        """
        return self.supply_by_class.get(job.eligibility_key, job.supply)


class Policy(ABC):
    """A job-sharing policy; subclasses set ``name`` and define ``score``, the rest is optional.

    Options are constructor arguments, validated against their annotations when the policy is loaded
    (:func:`policies.registry.load_policy`); use the types of :mod:`policies.options` for ranges.

    Attributes
    ----------
    name : str
        The policy's name, as in its ``propius.policies`` entry point.

    Examples
    --------
    A policy that serves the highest priority first, ties in registration order:

    >>> from typing import ClassVar
    >>> class HighestPriority(Policy):
    ...     name: ClassVar[str] = "highest-priority"
    ...
    ...     def score(self, job: JobView, ctx: SchedulingContext) -> float:
    ...         return -job.priority

    Registered in its package's ``pyproject.toml``::

        [project.entry-points."propius.policies"]
        highest-priority = "my_package.policies:HighestPriority"
    """

    name: ClassVar[str]

    def filter(self, job: JobView, ctx: SchedulingContext) -> bool:
        """Whether ``job`` may be served right now.

        Parameters
        ----------
        job : JobView
            One open job.
        ctx : SchedulingContext
            The decision's context.

        Returns
        -------
        bool
            False for a job the policy does not want served now (a quota, a budget); default True.
        """
        return True

    @abstractmethod
    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        """The job's place in the global order; lower is served first.

        Parameters
        ----------
        job : JobView
            One open job that passed ``filter``.
        ctx : SchedulingContext
            The decision's context (``ctx.client`` is None here).

        Returns
        -------
        float
            The score; ``math.inf`` puts a job last. Ties are broken by ``registered_at``, then ``job_id``.
        """

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        """The global order of the open jobs.

        Parameters
        ----------
        jobs : Sequence[JobView]
            Every open job, in no particular order.
        ctx : SchedulingContext
            The decision's context.

        Returns
        -------
        list of JobView
            The jobs that pass ``filter``, sorted by ``(score, registered_at, job_id)``. Override it when the
            order is not a per-job score (fair share ranks tenants by their usage across their jobs).
        """
        kept = [job for job in jobs if self.filter(job, ctx)]
        return sorted(kept, key=lambda job: (self.score(job, ctx), job.registered_at, job.job_id))

    def rank_for_client(
        self, attributes: Mapping[str, AttributeValue], jobs: Sequence[JobView], ctx: SchedulingContext
    ) -> list[JobView]:
        """Reorder, or drop, the jobs one checking-in client is eligible for.

        Parameters
        ----------
        attributes : Mapping[str, AttributeValue]
            The client's public attributes.
        jobs : Sequence[JobView]
            The open jobs the client is eligible for, in the global order.
        ctx : SchedulingContext
            The decision's context, with ``ctx.client`` set where the client's history is tracked.

        Returns
        -------
        list of JobView
            The jobs to offer the client, first offered first. The default keeps ``jobs``; a job left out is
            not offered to this client now (e.g. a bind predicted to be wasted).
        """
        return list(jobs)

    def wake_key(self, job: JobView) -> Callable[[ClientEstimate], float] | None:
        """Which waiting clients a free slot of ``job`` wakes first.

        Parameters
        ----------
        job : JobView
            The job whose round opened or freed slots.

        Returns
        -------
        callable or None
            A function of a waiting client's :class:`ClientEstimate` giving a sort key (lowest woken first,
            arrival order among equals), or None to wake the oldest waiters first (the default).
        """
        return None

    @property
    def wake_narrower_penalty(self) -> float:
        """How many times slower a keyed wake (:meth:`wake_key`, a predicted task time) counts a waiter that
        another open round of a smaller eligibility class still needs
        (:func:`control_plane.scheduling.wake.sparing_narrower`).

        Returns
        -------
        float
            Default 1.0: no penalty.
        """
        return 1.0

    @property
    def wants_fastest_fill(self) -> bool:
        """Whether the scheduler should estimate ``JobView.fastest_fill_at`` for the head of the order.

        The estimate is a pass over the eligible clients, so it is made only on request, at most every
        ``fill_period_s`` (see :mod:`control_plane.scheduling.fastest_fill`).

        Returns
        -------
        bool
            Default False.
        """
        return False
