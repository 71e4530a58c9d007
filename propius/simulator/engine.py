"""The discrete-event loop: clients come and go, check in, bind, train and deliver; rounds open and close.

One ``heapq`` of ``(time, seq, kind, a, b)`` tuples; ``seq`` breaks ties in push order, so a run is
a pure function of (workload, population, policy, config). Each client has at most a few events
pending (its next on/off switch and its task's end), and idle clients wait in a
:class:`~propius.simulator.waitpool.WaitPool` instead of polling, so the event count grows with binds,
not with idle time. Every decision is the scheduling core's (:mod:`control_plane.scheduling`), which
the live control plane drives too: ``job_view`` builds what the policy sees, ``order_open_rounds``
orders it, ``ranked_offers`` ranks the offers (see :mod:`propius.simulator.selection`),
``supply_by_class`` classifies clients, an ``Attempt`` per open round tracks its members, and
``estimate_fastest_fill``, ``WakeRule``, ``plan_round`` and ``retry_delay`` are the live rules.

Round semantics follow the control plane: a round opens as ``plan_round`` says; clients start their
task as soon as they bind; it closes when ``demand`` results arrived, else fails at the deadline and is re-run as a new
attempt. A client whose window closes mid-task holds its slot until its lease expires
(``lease_s``). Stragglers still working when a round closes are released at once.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from control_plane.scheduling.fastest_fill import FillEstimates, estimate_fastest_fill
from control_plane.scheduling.fifo_lag import passed_over
from control_plane.scheduling.history import GRID, ClientHistory
from control_plane.scheduling.matching import supply_by_class
from control_plane.scheduling.ordering import order_open_rounds
from control_plane.scheduling.rounds import retry_delay
from control_plane.scheduling.state import ActiveJob
from control_plane.scheduling.tiers import ClassTiers
from control_plane.scheduling.wake import WakeLedger, WakeRule, wake_order
from policies import JobView, Policy, SchedulingContext
from propius.config import Settings
from propius.simulator.jobs import SimJob
from propius.simulator.partition import partition
from propius.simulator.population import Population
from propius.simulator.selection import CentralSelection, ClientRandomSelection, Selection, StaticSelection
from propius.simulator.waitpool import WaitPool
from propius.simulator.workload import Workload
from propius.specs import AttributeValue

__all__ = ["Mode", "SimConfig", "Simulation"]

Mode = Literal["central", "static", "client-random"]
ON, OFF, ARRIVE, DONE, DEADLINE, LEASE, SUPPLY, CHECKIN = range(8)


def _live(setting: str) -> Any:
    """The live control plane's default of ``setting`` (:class:`propius.config.Settings`)."""
    return Settings.model_fields[setting].default


@dataclass(frozen=True)
class SimConfig:
    """How the simulated control plane is set up; every default is the live one, except ``supply_period_s``."""

    mode: Mode = "central"
    seed: int = 0  # policies' ctx.seed and the client-side random choices
    lease_s: float = _live("lease_s")  # a dropped client's slot is freed this long after it vanished
    max_offers: int = _live("max_offers")
    wake: WakeRule = WakeRule(scan_floor=_live("wake_scan_floor"))
    # Supply and speed-tier estimates are refreshed this often. Live it is every 5 s; the simulator
    # re-counts its whole population at each refresh, so it does it every 30 s to keep 100k-client
    # runs fast (the published benchmark tables use 30 s). The per-class tiers, a pass over the online
    # clients, are re-cut at a refresh only once a twentieth of the clients changed.
    supply_period_s: float = 30.0
    speed_tiers: int = _live("speed_tiers")
    retry_s: float = _live("max_wait_s")  # a client without a bind retries after retry_delay(this)
    fill_period_s: float = _live("fill_period_s")  # JobView.fastest_fill_at is re-estimated this often


class Simulation:
    def __init__(self, workload: Workload, population: Population, policy: Policy, config: SimConfig) -> None:
        self.workload = workload
        self.population = population
        self.policy = policy
        self.config = config
        self.rng = random.Random(config.seed)
        self.history = ClientHistory()
        self.class_tiers = ClassTiers(self.history, config.speed_tiers)
        self.pool = WaitPool(config.wake)
        classes: dict[str, object] = {}
        self.jobs: list[SimJob] = []
        for index, item in enumerate(workload.jobs):
            spec = item.to_job_spec()
            key = spec.requirements.eligibility_key()
            classes.setdefault(key, spec.requirements.public)
            class_bit = 1 << list(classes).index(key)
            active = ActiveJob(job_id=item.name, spec=spec, token_hash="", registered_at=item.arrival_s,
                               state="registered", rounds_done=0)
            wake_bit = 1 << index if config.mode == "static" else class_bit
            self.jobs.append(SimJob(index, key, spec, item, active, class_bit, wake_bit))
        self.by_id = {job.job_id: job for job in self.jobs}
        self.classes = list(classes)
        self.class_mask = self._class_masks(classes)
        self._private: dict[tuple[int, int], bool] = {}
        self.selection: Selection = self._selection()
        n = len(population)
        self.online = bytearray(n)
        self._counted = bytearray(n)  # online at the last supply refresh: what self.supply counts
        self.busy = [-1] * n
        self.token = [0] * n
        self.bound_at = [0.0] * n
        self.window = [0] * n
        self.online_by_mask: dict[int, int] = {}
        self.supply: dict[str, int] = dict.fromkeys(self.classes, 0)
        self.tiers: tuple[float, ...] = ()
        self._moves = 0  # clients gone online or offline so far
        self._tiers_at = 0  # history changes + moves when the class tiers were last cut
        self._mask_keys: dict[int, tuple[str, ...]] = {}
        self._ordered: list[JobView] = []
        self._fill = FillEstimates(config.fill_period_s)
        self._checking: set[int] = set()  # idle, their check-in event pending (released at a close, or woken)
        self._woken: WakeLedger[int, tuple[int, int]] = WakeLedger()  # attempt: (job index, round token)
        self._dirty = True
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._round_tokens = 0
        self.now = 0.0
        self.remaining = len(self.jobs)
        self.events = 0
        self.binds = 0
        self.dropped = 0
        self.busy_s = 0.0
        self.useful_s = 0.0

    # ---------------------------------------------------------------- set-up

    def _class_masks(self, classes: dict) -> list[int]:
        """Each client's eligibility classes as bits, via the live supply_by_class, once per phone model."""
        by_profile: dict[int, int] = {}
        masks = []
        for profile in self.population.profiles:
            mask = by_profile.get(id(profile))
            if mask is None:
                counts = supply_by_class([profile], classes)
                mask = by_profile[id(profile)] = sum(1 << i for i, key in enumerate(classes) if counts[key])
            masks.append(mask)
        return masks

    def _selection(self) -> Selection:
        if self.config.mode == "static":
            return StaticSelection(partition(self.jobs, self.class_mask, self.private_ok, self.config.seed))
        if self.config.mode == "client-random":
            return ClientRandomSelection()
        return CentralSelection()

    # ---------------------------------------------------------------- what selections call

    def ordered_views(self) -> list[JobView]:
        """Open rounds in policy order, rebuilt only after some job's state changed."""
        if self._dirty:
            views = [self.view_of(job) for job in self.jobs if job.state == "open"]
            ctx = SchedulingContext(now=self.now, supply_by_class=self.supply, seed=self.config.seed,
                                    speed_tiers=self.tiers, class_speed_tiers=self.class_tiers.bounds)
            self._ordered = order_open_rounds(self.policy, views, ctx,
                                              lambda head: self._fastest_fill_at(self.by_id[head.job_id]))
            self._dirty = False
        return self._ordered

    def _fastest_fill_at(self, job: SimJob) -> float | None:
        """``JobView.fastest_fill_at`` of ``job`` from the learned estimates, as the live scheduler computes
        it, recomputed every ``fill_period_s``."""
        def estimate() -> float | None:
            others = [(self.view_of(other), other.current) for other in self.jobs
                      if other is not job and other.state == "open"]
            return estimate_fastest_fill(self.view_of(job), job.current, others, job.served,
                                         self._idle(job.class_bit), self.history.estimate, self.now)

        return self._fill.get(job.index, job.token, self.now, estimate)

    def _idle(self, bit: int) -> Iterator[int]:
        """Online clients of the class ``bit`` bound to no round: waiting, or about to check in."""
        yield from self.pool.waiting(bit)
        yield from (c for c in self._checking if self.class_mask[c] & bit)

    def view_of(self, job: SimJob) -> JobView:
        if job.view is not None:
            return job.view
        shape = (job.spec.task.work_samples, job.workload.model_size_kbit)
        return job.build_view(self.supply[job.key], self.class_tiers.fast_task_s(job.key, *shape))

    @property
    def max_offers(self) -> int:
        return self.config.max_offers

    def profile(self, client: int) -> Mapping[str, AttributeValue]:
        return self.population.profiles[client]

    def context(self, client: int, now: float) -> SchedulingContext:
        return SchedulingContext(now=now, supply_by_class=self.supply, seed=self.config.seed,
                                 client=self.history.estimate(client), speed_tiers=self.tiers,
                                 class_speed_tiers=self.class_tiers.bounds, client_counted=bool(self._counted[client]))

    def private_ok(self, client: int, job: SimJob) -> bool:
        private = self.population.private[client]
        key = (job.index, id(private))
        ok = self._private.get(key)
        if ok is None:
            ok = self._private[key] = job.spec.requirements.private.admits(private)
        return ok

    def joined_by(self, client: int) -> Callable[[JobView], bool]:
        """Whether ``client`` already joined a view's open round (the live ``SchedulerView.bound_to``)."""
        return lambda view: client in self.by_id[view.job_id].current.joined

    def first_accepted(self, client: int, offers: list[JobView]) -> SimJob | None:
        """The first offer the device's private constraints admit and the bind accepts (as clients.device does).

        Rounds the client already joined (which the live bind refuses, ``already_bound``) are not among
        the offers: ``ranked_offers`` leaves them out (``joined_by``).
        """
        for view in offers:
            job = self.by_id[view.job_id]
            if self.private_ok(client, job) and job.open_slots > 0:
                return job
        return None

    # ---------------------------------------------------------------- the loop

    def _push(self, time: float, kind: int, a: int, b: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, a, b))

    def run(self) -> None:
        horizon = self.population.horizon_s
        for client, windows in enumerate(self.population.windows):
            if windows:
                self._push(windows[0][0], ON, client)
        for job in self.jobs:
            self._push(job.workload.arrival_s, ARRIVE, job.index)
        self._push(0.0, SUPPLY, 0)
        heap = self._heap
        pop = heapq.heappop
        while heap and self.remaining:
            time, _, kind, a, b = pop(heap)
            if time > horizon:
                break
            self.now = time
            self.events += 1
            if kind == DONE:
                self._on_done(a, b)
            elif kind == CHECKIN:
                self._checking.discard(a)
                if self.online[a] and self.busy[a] < 0 and (b < 0 or b == self.token[a]) and a not in self.pool:
                    self._check_in(a)
            elif kind == ON:
                self._on_online(a)
            elif kind == OFF:
                self._on_offline(a)
            elif kind == LEASE:
                self._on_lease_expired(self.jobs[a], b)
            elif kind == DEADLINE:
                job = self.jobs[a]
                if job.state == "open" and job.token == b:
                    self._close(job, succeeded=False)
            elif kind == ARRIVE:
                self._open(self.jobs[a])
            elif kind == SUPPLY:
                self._refresh_supply()
        self.now = min(self.now, horizon)

    # ---------------------------------------------------------------- clients

    def _on_online(self, client: int) -> None:
        self.online[client] = 1
        self._moves += 1
        mask = self.class_mask[client]
        self.online_by_mask[mask] = self.online_by_mask.get(mask, 0) + 1
        self.history.session_started(client, self.now)
        self._push(self.population.windows[client][self.window[client]][1], OFF, client)
        self.token[client] += 1
        self._check_in(client)

    def _on_offline(self, client: int) -> None:
        self.online[client] = 0
        self._moves += 1
        self.online_by_mask[self.class_mask[client]] -= 1
        self.history.session_ended(client, self.now)
        self.pool.remove(client)
        self._checking.discard(client)
        index = self.busy[client]
        if index >= 0:
            job = self.jobs[index]
            job.current.left(client)
            job.view = None
            self._dirty = True
            self.busy_s += self.now - self.bound_at[client]
            self.history.missed(client, self.now - self.bound_at[client], job.spec.task.work_samples,
                                job.workload.model_size_kbit)
            self.dropped += 1
            self.busy[client] = -1
            self._push(self.now + self.config.lease_s, LEASE, index, job.token)
        self.token[client] += 1
        self.window[client] += 1
        windows = self.population.windows[client]
        if self.window[client] < len(windows):
            self._push(windows[self.window[client]][0], ON, client)

    def _check_in(self, client: int) -> None:
        job, ranked = self.selection.choose(self, client, self.now)
        self._woken.offered(client, (self.by_id[view.job_id].index for view in ranked[:self.max_offers]))
        if job is not None:
            self._pass_over(job, ranked)
            self._bind(client, job)
        elif self.selection.polls:
            self.token[client] += 1
            self._push(self.now + retry_delay(self.config.retry_s, self.rng), CHECKIN, client, self.token[client])
        else:
            mask = self.selection.wake_mask(self, client)
            if mask:
                self.pool.add(client, mask)
        missed = self._woken.settled(client, None if job is None else (job.index, job.token), self._has_free_slot)
        if missed is not None:  # woken for another round and left a free slot there: that round wakes one more
            self._wake(self.jobs[missed[0]], 1)

    def _has_free_slot(self, attempt: tuple[int, int]) -> bool:
        """Whether the round attempt (job index, round token) is still open with a slot free (``open_slots`` is 0
        unless the job's round is open)."""
        job = self.jobs[attempt[0]]
        return job.token == attempt[1] and job.open_slots > 0

    def _pass_over(self, job: SimJob, ranked: Sequence[JobView]) -> None:
        """Count the bind on the older round FIFO would have given it (the live binder's ``passed_over``),
        among the rounds the policy would have offered the client (``ranked``)."""
        passed = passed_over(job.job_id, ranked, lambda job_id: self.by_id[job_id].current.short_under_fifo())
        if passed is not None and self.by_id[passed].current.passed_over(self.now):
            self.by_id[passed].view = None

    def _bind(self, client: int, job: SimJob) -> None:
        job.bound += 1
        job.binds += 1
        job.current.bound(client, self.now, self.history.estimate(client).reliability, job.bound)
        job.view = None
        self._dirty = True
        self.binds += 1
        self.busy[client] = job.index
        self.bound_at[client] = self.now
        self.token[client] += 1
        download, train, upload = self.population.task_s(client, job.spec.task.work_samples,
                                                         job.workload.model_size_kbit)
        end = self.now + download + train + upload
        if end <= self.population.windows[client][self.window[client]][1]:
            self._push(end, DONE, client, self.token[client])

    def _on_done(self, client: int, token: int) -> None:
        if token != self.token[client] or self.busy[client] < 0:
            return
        job = self.jobs[self.busy[client]]
        self.busy[client] = -1
        elapsed = self.now - self.bound_at[client]
        self.busy_s += elapsed
        job.work_s += elapsed
        job.results += 1
        job.served.add(client)
        job.current.delivered(client)
        job.view = None
        self._dirty = True
        download, train, _ = self.population.task_s(client, job.spec.task.work_samples, job.workload.model_size_kbit)
        self.history.delivered(client, download, train, job.spec.task.work_samples, job.workload.model_size_kbit)
        if job.results >= job.min_results:
            self._close(job, succeeded=True)
        self._check_in(client)

    def _on_lease_expired(self, job: SimJob, token: int) -> None:
        if job.state != "open" or job.token != token:
            return
        job.bound -= 1
        job.view = None
        self._dirty = True
        self._wake(job, 1)

    # ---------------------------------------------------------------- rounds

    def _open(self, job: SimJob) -> None:
        self._round_tokens += 1
        job.open_round(self.now, self._round_tokens)
        self._dirty = True
        self._push(job.deadline_at, DEADLINE, job.index, job.token)
        self._wake(job, job.target)

    def _close(self, job: SimJob, succeeded: bool) -> None:
        self._woken.ended((job.index, job.token))
        released = list(job.current.members)
        for client in released:
            elapsed = self.now - self.bound_at[client]
            self.busy_s += elapsed
            self.history.unfinished(client, elapsed, job.spec.task.work_samples, job.workload.model_size_kbit)
            if not succeeded:
                self.history.missed(client, elapsed, job.spec.task.work_samples, job.workload.model_size_kbit)
            self.busy[client] = -1
            self.token[client] += 1
        if succeeded:
            self.useful_s += job.work_s
        job.finish_round(self.now, succeeded)
        self._dirty = True
        if job.state == "done":
            job.busy_at_finish, job.useful_at_finish = self.busy_s, self.useful_s
            self.remaining -= 1
            self._woken.job_done(job.index)
        else:
            self._open(job)
        for client in released:
            self._push(self.now, CHECKIN, client, -1)
        self._checking.update(released)

    def _eligible_for_any(self, classes: frozenset[str]) -> Callable[[int], bool]:
        """Whether a client is eligible for any of the eligibility ``classes``: one test of its class mask."""
        mask = sum(1 << self.classes.index(key) for key in classes)
        return lambda client: bool(self.class_mask[client] & mask)

    def _wake(self, job: SimJob, slots: int) -> None:
        view = self.view_of(job)
        score = self.policy.wake_key(view)
        key = None if score is None else self._woken.rank(job.index, wake_order(
            lambda client: score(self.history.estimate(client)), view, self.ordered_views,
            self.policy.wake_narrower_penalty, self._eligible_for_any))
        attempt = (job.index, job.token)
        woken = self.pool.wake(job.wake_bit, slots, key, self._woken.skip(attempt))
        self._woken.woke(job.index, attempt, woken)
        for client in woken:
            self._push(self.now, CHECKIN, client, -1)
            self._checking.add(client)

    def _refresh_supply(self) -> None:
        supply = dict.fromkeys(self.classes, 0)
        for mask, count in self.online_by_mask.items():
            for i, key in enumerate(self.classes):
                if mask >> i & 1:
                    supply[key] += count
        self._counted = bytearray(self.online)
        tiers = self.history.speed_tiers(self.config.speed_tiers)
        recut = self._recut_class_tiers()
        if supply != self.supply or tiers != self.tiers or recut:
            self.supply, self.tiers = supply, tiers
            for job in self.jobs:
                job.view = None
            self._dirty = True
        if self.remaining:
            self._push(self.now + self.config.supply_period_s, SUPPLY, 0)

    def _recut_class_tiers(self) -> bool:
        """Cut the per-class speed tiers over the online clients, as the live scheduler does over the recent
        ones; only once a twentieth of the clients changed (a learned speed, or online or offline), since a
        cut is a pass over the population. True when cut."""
        moved = self.history.changes + self._moves
        if moved - self._tiers_at < max(GRID, len(self.population) // 20):
            return False
        self._tiers_at = moved
        self.class_tiers.refresh((client, self._classes_of(self.class_mask[client]))
                                 for client in range(len(self.population)) if self.online[client])
        return True

    def _classes_of(self, mask: int) -> tuple[str, ...]:
        keys = self._mask_keys.get(mask)
        if keys is None:
            keys = self._mask_keys[mask] = tuple(key for i, key in enumerate(self.classes) if mask >> i & 1)
        return keys
