"""What the dashboard shows, as one JSON document: live jobs and rounds, the client pool, why jobs wait.

Built on the control plane's event loop from what it already keeps (the job registry, the scheduler's
policy-ordered view, its recent clients and their eligibility classes as of its last supply estimate,
the waiting clients) plus reads of Redis (the rounds and their leases). A read only: nothing is written,
no estimate is changed. Built at most once per ``REFRESH_S`` however many pages poll, and it
lists at most ``MAX_JOBS`` jobs (the oldest first), so an outsider's job count does not grow the page.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.scheduler import SchedulerView
from control_plane.scheduling.class_queues import class_queues, waiting_by_class
from control_plane.scheduling.state import ActiveJob, RoundState
from control_plane.scheduling.why_waiting import (
    Eligibility,
    failure_line,
    policy_reason,
    shortfall_line,
    waiting_line,
)
from policies import JobView
from propius.config import Settings

__all__ = ["MAX_JOBS", "REFRESH_S", "DashboardSource", "DashboardState"]

MAX_JOBS = 200
REFRESH_S = 1.0


class RoundPanel(BaseModel):
    round: int
    attempt: int
    state: str  # open | closed | failed
    bound: int
    target: int
    results: int
    demand: int
    age_s: float  # since it opened (until its end, for an ended one)


class JobPanel(BaseModel):
    job_id: str
    name: str
    owner: str
    state: str  # registered | running
    rounds_done: int
    rounds_total: int | None
    jct_s: float  # since registration
    round: RoundPanel | None
    eligible: int  # recent clients its public requirements admit
    busy: dict[str, int]  # job id -> its eligible clients bound there
    why_waiting: list[str]  # what the job waits for: clients, the policy's order, results


class ClassPanel(BaseModel):
    constraints: str  # the class's public requirements as JSON ("{}": every client)
    jobs: list[str]  # names of its live jobs
    supply: int
    bound: int  # of its recent clients, those bound to some round
    open_rounds: int
    waiting_jobs: int
    open_slots: int
    waiting_clients: int  # on this shard


class DeviceClassPanel(BaseModel):
    device_class: str
    recent: int
    bound: int


class DashboardState(BaseModel):
    at: float
    policy: str
    address: str
    window_s: float
    clients_recent: int
    clients_bound: int
    clients_waiting: int  # long-polling on this shard
    jobs: list[JobPanel]
    jobs_not_shown: int
    classes: list[ClassPanel]
    device_classes: list[DeviceClassPanel]


class DashboardSource:
    """Builds :class:`DashboardState` for one control plane (``ControlPlane.dashboard``)."""

    def __init__(self, settings: Settings, hot: HotState, jobs: JobRegistry, view: SchedulerView,
                 waiting: Callable[[], list[str]], address: Callable[[], str]) -> None:
        self._settings = settings
        self._hot = hot
        self._jobs = jobs
        self._view = view
        self._waiting = waiting
        self._address = address
        self._devices: dict[str, tuple[str, str]] = {}  # recent client -> (profile JSON, device class)
        self._device_counts: Counter[str] = Counter()
        self._estimates = -1  # the scheduler's supply estimate they were counted from
        self._cached: tuple[float, bytes] | None = None
        self._building: asyncio.Lock | None = None

    async def json(self) -> bytes:
        """The current state as JSON, rebuilt when older than ``REFRESH_S``; concurrent callers share one build."""
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:
            cached = self._cached
            if cached is None or time.monotonic() - cached[0] >= REFRESH_S:
                cached = (time.monotonic(), (await self.state(time.time())).model_dump_json().encode())
                self._cached = cached
            return cached[1]

    async def state(self, now: float) -> DashboardState:
        """The recent clients, their classes and the supply are the scheduler's, from its last supply estimate;
        which clients are bound is read from the open rounds' leases. A build costs a pass over the live jobs
        and the bound clients; the recent clients' device classes are counted once per supply estimate."""
        window_s = self._settings.client_ttl_s
        live = sorted(self._jobs.active(), key=lambda job: (job.registered_at, job.job_id))
        shown = live[:MAX_JOBS]
        states = await self._hot.rounds([job.job_id for job in live])
        bound = await self._hot.bound_clients(states.values())
        await self._count_devices()
        busy: dict[str, Counter[str]] = {}  # class -> job -> the class's recent clients bound to it
        busy_devices: Counter[str] = Counter()
        for client_id, job_id in bound.items():
            for key in self._view.classes_of(client_id):
                busy.setdefault(key, Counter())[job_id] += 1
            busy_devices[self._devices.get(client_id, ("", "?"))[1]] += 1
        supply = self._view.supply
        by_class = {key: Eligibility(supply.get(key, 0), dict(busy.get(key, {})))
                    for key in {job.eligibility_key for job in live}}
        names = {job.job_id: job.spec.name for job in live}
        snapshot = self._view.snapshot()
        panels = [self._job_panel(job, states.get(job.job_id), by_class[job.eligibility_key], names, snapshot.views,
                                  window_s, now) for job in shown]
        class_jobs: dict[str, list[str]] = {}
        for job in live:
            class_jobs.setdefault(job.eligibility_key, []).append(job.spec.name)
        waiting = self._waiting()
        queues = class_queues(snapshot.views, supply, waiting_by_class(waiting, self._view.classes_of))
        classes = [
            ClassPanel(constraints=queue.key, jobs=class_jobs.get(queue.key, [])[:10], supply=queue.supply,
                       bound=sum(busy.get(queue.key, {}).values()), open_rounds=queue.open_rounds,
                       waiting_jobs=queue.waiting_jobs, open_slots=queue.open_slots,
                       waiting_clients=queue.waiting_clients)
            for queue in queues[:MAX_JOBS]
        ]
        return DashboardState(
            at=now, policy=self._settings.policy, address=self._address(), window_s=window_s,
            clients_recent=len(self._devices), clients_bound=len(bound), clients_waiting=len(waiting),
            jobs=panels, jobs_not_shown=len(live) - len(shown), classes=classes,
            device_classes=[DeviceClassPanel(device_class=device, recent=count, bound=busy_devices[device])
                            for device, count in sorted(self._device_counts.items())],
        )

    async def _count_devices(self) -> None:
        """After a new supply estimate: the recent clients' device classes, each profile parsed once."""
        if self._estimates == self._view.estimates:
            return
        self._estimates = self._view.estimates
        devices: dict[str, tuple[str, str]] = {}
        for i, (client_id, raw, _) in enumerate(self._view.recent_clients()):
            cached = self._devices.get(client_id)
            if cached is None or cached[0] != raw:
                try:
                    cached = (raw, str(json.loads(raw).get("device_class", "edge")))
                except (ValueError, AttributeError):
                    cached = (raw, "?")
            devices[client_id] = cached
            if i % 5000 == 4999:
                await asyncio.sleep(0)  # a large population must not stall check-ins
        self._devices = devices
        self._device_counts = Counter(device for _, device in devices.values())

    def _job_panel(self, job: ActiveJob, state: RoundState | None, supply: Eligibility, names: dict[str, str],
                   ordered: Sequence[JobView], window_s: float, now: float) -> JobPanel:
        spec = job.spec
        elsewhere = {job_id: count for job_id, count in supply.busy.items() if job_id != job.job_id}
        supply = Eligibility(supply.eligible, elsewhere)
        panel_round = None
        if state is not None:
            end = state.closed_at if state.state != "open" and state.closed_at else now
            panel_round = RoundPanel(round=state.round, attempt=state.attempt, state=state.state, bound=state.bound,
                                     target=state.target, results=state.results, demand=state.demand,
                                     age_s=max(0.0, end - state.started_at))
        why: list[str] = []
        if state is not None and state.state == "open" and state.bound >= state.target:
            why.append(policy_reason(job.job_id, state, ordered, self._settings.policy))  # all bound: results due
        else:
            why.append(waiting_line(spec.demand, supply, names, window_s))
            if state is None:
                why.append("no round started yet: the job's driver (SDK, `propius submit --wait`) starts them")
            elif state.state == "failed":
                why.append(failure_line(state.round, state.attempt, state.results, spec.results_to_close, supply))
            else:
                why.append(policy_reason(job.job_id, state, ordered, self._settings.policy))
            if (short := shortfall_line(spec.demand, supply)) is not None:
                why.append(short)
        return JobPanel(job_id=job.job_id, name=spec.name, owner=spec.owner, state=job.state,
                        rounds_done=job.rounds_done, rounds_total=spec.rounds, jct_s=max(0.0, now - job.registered_at),
                        round=panel_round, eligible=supply.eligible, busy=elsewhere, why_waiting=why)

