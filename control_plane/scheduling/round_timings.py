"""A job's round timings, learned the same way by the live control plane and the simulator.

Two numbers per job drive the speed-tier and straggler rules (see :mod:`policies.irs` and
:mod:`policies.plugins`): how long its rounds wait for their ``demand``-th client (scheduling
delay) and how long they then wait for the results (response collection). Both are smoothed over the
job's round attempts, failed ones included, so one odd round moves them only part of the way. A third,
summed over all its attempts, is the time they lost to jobs registered after it
(:mod:`control_plane.scheduling.fifo_lag`).
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.fifo_lag import lost_s

__all__ = ["SMOOTHING", "RoundTimings"]

SMOOTHING = 0.3  # weight of the newest round attempt


def _smooth(previous: float | None, value: float) -> float:
    return value if previous is None else previous + SMOOTHING * (value - previous)


@dataclass(slots=True)
class RoundTimings:
    recent_schedule_s: float | None = None
    recent_response_s: float | None = None
    lost_to_newer_s: float = 0.0

    def finished(self, attempt: Attempt, closed_at: float) -> tuple[float, float]:
        """Fold one closed round attempt in; its (scheduling delay, response time). A round that never held
        ``demand`` clients (``filled_at`` None) spent all its time scheduling."""
        filled = closed_at if attempt.filled_at is None else attempt.filled_at
        schedule_s, response_s = filled - attempt.opened_at, closed_at - filled
        self.recent_schedule_s = _smooth(self.recent_schedule_s, schedule_s)
        self.recent_response_s = _smooth(self.recent_response_s, response_s)
        self.lost_to_newer_s += lost_s(attempt, closed_at)
        return schedule_s, response_s
