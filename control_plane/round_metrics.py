"""Round latencies for the metrics, from the event bus: scheduling delay and round duration.

Every shard receives every event, so each latency is observed by one shard only: the scheduling delay
(round open to its ``demand``-th bind) by the shard that opened the round, the duration (open to close
or failure) by the shard that ended it. Summed over shards, each round counts once.
"""

from __future__ import annotations

from control_plane.events import Event
from control_plane.metrics import Metrics
from control_plane.scheduling.state import RoundState

__all__ = ["RoundLatency"]


class RoundLatency:
    """A bus listener (``bus.add_listener(latency.on_event)``) feeding ``propius_schedule_seconds`` and
    ``propius_round_seconds``; it holds one entry per round this shard opened and that is still binding."""

    def __init__(self, metrics: Metrics, bus_id: str) -> None:
        self._metrics = metrics
        self._bus_id = bus_id
        self._binding: dict[str, RoundState] = {}  # job -> its open round, until demand is bound

    def on_event(self, event: Event) -> None:
        own = event.origin == self._bus_id
        if event.kind == "round_started" and own:
            state = RoundState.from_hash(event.job_id, event.state or {})
            if state is not None:
                self._binding[event.job_id] = state
        elif event.kind == "client_bound":
            state = self._binding.get(event.job_id)
            if state is not None and (state.round, state.attempt) == (event.round, event.attempt) \
                    and event.bound >= state.demand:
                self._metrics.schedule_seconds.observe(max(0.0, event.at - state.started_at))
                del self._binding[event.job_id]
        elif event.kind in ("job_completed", "job_cancelled"):
            self._binding.pop(event.job_id, None)
        elif event.kind in ("round_closed", "round_failed"):
            state = self._binding.get(event.job_id)
            if state is not None and (state.round, state.attempt) == (event.round, event.attempt):
                del self._binding[event.job_id]
            ended = RoundState.from_hash(event.job_id, event.state or {}) if own else None
            if ended is not None:
                end = ended.closed_at or event.at
                self._metrics.round_seconds.labels(ended.state).observe(max(0.0, end - ended.started_at))
