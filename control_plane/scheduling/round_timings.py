"""A job's recent round timings, learned the same way by the live control plane and the simulator.

Two numbers per job drive the speed-tier and straggler rules (see :mod:`policies.irs` and
:mod:`policies.propius_default`): how long its rounds wait for their ``demand``-th client (scheduling
delay) and how long they then wait for the results (response collection). Both are smoothed over the
job's round attempts, failed ones included, so one odd round moves them only part of the way.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SMOOTHING", "RoundTimings"]

SMOOTHING = 0.3  # weight of the newest round attempt


def _smooth(previous: float | None, value: float) -> float:
    return value if previous is None else previous + SMOOTHING * (value - previous)


@dataclass(slots=True)
class RoundTimings:
    recent_schedule_s: float | None = None
    recent_response_s: float | None = None

    def finished(self, opened_at: float, filled_at: float | None, closed_at: float) -> tuple[float, float]:
        """Fold one round attempt in; its (scheduling delay, response time). A round that never held
        ``demand`` clients (``filled_at`` None) spent all its time scheduling."""
        filled = closed_at if filled_at is None else filled_at
        schedule_s, response_s = filled - opened_at, closed_at - filled
        self.recent_schedule_s = _smooth(self.recent_schedule_s, schedule_s)
        self.recent_response_s = _smooth(self.recent_response_s, response_s)
        return schedule_s, response_s
