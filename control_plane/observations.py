"""What the live control plane learns for the policies: client estimates and round timings, from events.

The informed rules of the policies (speed tiers, deadline-, availability- and straggler-aware
dispatch, see :mod:`policies.propius_default`) read optional observations: a :class:`ClientEstimate`
of the checking-in client, the speed-tier bounds (over all clients, and per eligibility class over the
recent clients the supply count reads), and per job its task shape, recent round timings
and expected results. The simulator feeds them from its own clock; here they are learned from the
job events (:mod:`control_plane.events`), which every shard receives, so every shard learns the same
(check-in sessions excepted: a shard sees the check-ins of its own clients, which are the ones it
ranks). The bookkeeping is the simulator's, from :mod:`control_plane.scheduling`: one
:class:`~control_plane.scheduling.attempts.Attempt` per open round, a
:class:`~control_plane.scheduling.history.ClientHistory` and per job a
:class:`~control_plane.scheduling.round_timings.RoundTimings`. Kept in memory, and a client not heard of for
``KEEP_S`` is forgotten; after a restart the estimates start empty and the policies fall back to their
plain order until the first rounds are observed.

A delivered task's download time runs from its bind (or the model's publication, if later) to the end
of its fetch, and its training time is what the device reports (both on the server clock); a report
can only split the task's time, not shorten it: phases longer than what the server observed between
the bind and the upload are scaled down to fit.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Container, Mapping, Sequence

from control_plane.events import Event
from control_plane.jobs import JobRegistry
from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.fastest_fill import estimate_fastest_fill
from control_plane.scheduling.fifo_lag import view_fields
from control_plane.scheduling.history import ClientHistory
from control_plane.scheduling.round_timings import RoundTimings
from control_plane.scheduling.state import RoundState
from control_plane.scheduling.tiers import ClassTiers
from policies import ClientEstimate, JobView

__all__ = ["KEEP_S", "LiveObservations"]

KEEP_S = 7 * 24 * 3600.0  # what was learned of a client outlives its sessions, not its absence for a week


class LiveObservations:
    def __init__(self, jobs: JobRegistry, speed_tiers: int = 3) -> None:
        self.history = ClientHistory()
        self.tiers = ClassTiers(self.history, speed_tiers)
        self._jobs = jobs
        self._attempts: dict[str, Attempt] = {}
        self._timings: defaultdict[str, RoundTimings] = defaultdict(RoundTimings)
        self._model_kbit: dict[str, float] = {}
        self._heard: dict[str, float] = {}  # last check-in or event naming the client
        self._served: defaultdict[str, set[str]] = defaultdict(set)  # job -> clients that delivered to it

    # ---------------------------------------------------------------- what the policies read

    def estimate(self, client_id: str) -> ClientEstimate:
        return self.history.estimate(client_id)

    def speed_tiers(self) -> tuple[float, ...]:
        return self.tiers.speed_tiers()

    def class_speed_tiers(self) -> Mapping[str, tuple[float, ...]]:
        return self.tiers.bounds

    def annotate(self, view: JobView) -> JobView:
        """``view`` with what has been observed of its job (unchanged where nothing was)."""
        known: dict[str, float | None] = {}
        if (kbit := self._model_kbit.get(view.job_id)) is not None:
            known["model_size_kbit"] = kbit
            if (fast := self.tiers.fast_task_s(view.eligibility_key, view.work_samples, kbit)) is not None:
                known["fast_task_s"] = fast
        timings = self._timings.get(view.job_id)
        if timings is not None and timings.recent_schedule_s is not None:
            known["recent_schedule_s"] = timings.recent_schedule_s
            known["recent_response_s"] = timings.recent_response_s
        attempt = self._attempt_of(view)
        lost, fifo_filled = view_fields(timings.lost_to_newer_s if timings is not None else 0.0, attempt)
        if lost > 0 or fifo_filled is not None:
            known["lost_to_newer_s"], known["fifo_filled_at"] = lost, fifo_filled
        if attempt is not None:
            known["expected_results"] = attempt.expected
        return dataclasses.replace(view, **known) if known else view

    def fastest_fill_at(
        self, head: JobView, views: Sequence[JobView], online: Container[str], now: float,
    ) -> float | None:
        """``head.fastest_fill_at`` (:func:`~control_plane.scheduling.fastest_fill.estimate_fastest_fill`)
        over the other open rounds of ``views`` (annotated, for their task shapes) and the ``online``
        clients that work for none of them."""
        attempt = self._attempt_of(head)
        if attempt is None:
            return None
        others = [(view, other) for view in views
                  if view.job_id != head.job_id and (other := self._attempt_of(view)) is not None]
        served = self._served.get(head.job_id, set())
        working = {client for _, other in others for client in other.members}
        idle = (client for client in served if client in online and client not in working)
        return estimate_fastest_fill(head, attempt, others, served, idle, self.history.estimate, now)

    def short_under_fifo(self, job_id: str) -> bool:
        """Whether the job's open round is still short of ``demand`` under FIFO
        (:meth:`Attempt.short_under_fifo`); True while the events have not told of the round."""
        attempt = self._attempts.get(job_id)
        return attempt is None or attempt.short_under_fifo()

    def _attempt_of(self, view: JobView) -> Attempt | None:
        """The tracked attempt of ``view``'s open round (None: the events have not told of it yet)."""
        attempt = self._attempts.get(view.job_id)
        return attempt if attempt is not None and attempt.opened_at == view.opened_at else None

    # ---------------------------------------------------------------- what it learns from

    def checked_in(self, client_id: str, now: float, session_gap_s: float) -> None:
        """A check-in; one after more than ``session_gap_s`` without a word from the client starts a new
        session. Its binds and uploads count as words: a long task between two check-ins is no absence."""
        last = self._heard.get(client_id)
        if last is None or now - last > session_gap_s:
            if last is not None:
                self.history.session_ended(client_id, last)
            self.history.session_started(client_id, now)
        self._heard[client_id] = now

    def forget_before(self, since: float) -> int:
        """Forget the clients not heard of since ``since``; how many."""
        gone = [client for client, at in self._heard.items() if at < since]
        for client in gone:
            del self._heard[client]
            self.history.forget(client)
        for served in self._served.values():
            served.difference_update(gone)
        return len(gone)

    def on_event(self, event: Event) -> bool:
        """Fold one event in; True when a job's observations changed (its view must be rebuilt)."""
        kind, job_id = event.kind, event.job_id
        if kind == "round_started":
            state = RoundState.from_hash(job_id, event.state or {})
            if state is None:
                return False
            self._attempts[job_id] = Attempt(state.round, state.attempt, state.started_at, state.demand)
            return True
        if kind == "model_published" and event.model_kbit > 0:
            self._model_kbit[job_id] = event.model_kbit
            attempt = self._attempts.get(job_id)
            if attempt is not None and (attempt.round, attempt.attempt) == (event.round, event.attempt):
                attempt.published_at = event.at
            return True
        if kind in ("job_completed", "job_cancelled"):
            self._attempts.pop(job_id, None)
            self._timings.pop(job_id, None)
            self._model_kbit.pop(job_id, None)
            self._served.pop(job_id, None)
            return False
        if event.client_id:
            self._heard[event.client_id] = event.at
        passed = self._attempts.get(event.passed_over) if kind == "client_bound" else None
        moved = passed is not None and passed.passed_over(event.at)
        attempt = self._attempts.get(job_id)
        if attempt is None or (attempt.round, attempt.attempt) != (event.round, event.attempt):
            return moved
        if kind == "client_bound":
            reliability = self.history.estimate(event.client_id).reliability
            bound = event.bound if event.bound >= 0 else len(attempt.members) + (event.client_id not in attempt.members)
            attempt.bound(event.client_id, event.at, reliability, bound)
        elif kind == "update_accepted":
            bound_at = attempt.delivered(event.client_id)
            if bound_at is not None:
                self._served[job_id].add(event.client_id)
                self._delivered(job_id, event, max(bound_at, attempt.published_at or bound_at), bound_at)
        elif kind in ("client_dropped", "client_released"):
            bound_at = attempt.left(event.client_id)
            if bound_at is not None and kind == "client_dropped":
                self._missed(job_id, event.client_id, event.at - bound_at)
        elif kind in ("round_closed", "round_failed"):
            self._timings[job_id].finished(attempt, event.at)
            for client_id, (bound_at, _) in attempt.members.items():  # still working when the round ended
                worked_from = max(bound_at, attempt.published_at or bound_at)  # its task began with the model
                self.history.unfinished(client_id, event.at - worked_from, self._work_samples(job_id),
                                        self._model_kbit.get(job_id, 0.0))
                if kind == "round_failed":
                    self._missed(job_id, client_id, event.at - bound_at)
            del self._attempts[job_id]
        else:
            return False
        return True

    def _work_samples(self, job_id: str) -> float:
        job = self._jobs.cached(job_id)
        return job.spec.task.work_samples if job is not None else 0.0

    def _delivered(self, job_id: str, event: Event, fetch_from: float, bound_at: float) -> None:
        fetch_s, train_s = event.fetch_end - fetch_from, event.train_s
        model_kbit = self._model_kbit.get(job_id, 0.0)
        if event.fetch_end <= 0 or fetch_s <= 0 or train_s <= 0 or model_kbit <= 0:
            self.history.delivered(event.client_id, 0.0, 0.0, 0.0, 0.0)  # no usable report: the delivery counts
            return
        observed = event.at - bound_at
        if 0 < observed < fetch_s + train_s:
            scale = observed / (fetch_s + train_s)
            fetch_s, train_s = fetch_s * scale, train_s * scale
        self.history.delivered(event.client_id, fetch_s, train_s, self._work_samples(job_id), model_kbit)

    def _missed(self, job_id: str, client_id: str, elapsed_s: float) -> None:
        self.history.missed(client_id, elapsed_s, self._work_samples(job_id), self._model_kbit.get(job_id, 0.0))
