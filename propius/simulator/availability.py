"""Seeded client availability: diurnal on/off windows, standing in for the FedScale behaviour trace.

The original experiments replayed a 500k-row FedScale availability trace that is not shipped here.
This model keeps the features that matter to a scheduler: clients come and go in sessions of hours,
most of them in the evening and night (phones charging on Wi-Fi), each client has a habit (its own
typical start hour and session length) that varies from day to day, and a few extra short sessions
happen at random times. Everything is drawn from one ``numpy`` generator, so a seed fixes the trace.

Per client:

- a typical session length ``L ~ mean_session_h x LogNormal(0, client_spread)`` (normalised so the
  population mean is ``mean_session_h``);
- a main start hour: with probability ``evening_fraction`` ``Normal(evening_hour, evening_sd_h)``,
  else uniform over the day;
- each day, a main session starting at that hour ``+ Normal(0, start_jitter_h)`` lasting
  ``L x LogNormal(0, day_spread)``, and ``Poisson(extra_sessions)`` extra sessions at uniform times
  lasting ``extra_length x L x LogNormal(0, day_spread)``; overlapping sessions are merged.

The default ``mean_session_h = 1.3`` (about 7 % of clients online on average, 17 % at the evening
peak, 3 % at midday) was calibrated once: it is the value at which FIFO's average JCT on the
policy-20jobs workload with 15,000 clients comes closest to the published testbed's 24,480 s. It
was not tuned per policy.

``always`` mode makes every client available for the whole horizon (for experiments that isolate
binding from availability).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["AvailabilityModel"]

DAY_S = 86_400.0


@dataclass(frozen=True)
class AvailabilityModel:
    mode: Literal["diurnal", "always"] = "diurnal"
    mean_session_h: float = 1.3
    client_spread: float = 0.5
    day_spread: float = 0.25
    evening_fraction: float = 0.7
    evening_hour: float = 21.0
    evening_sd_h: float = 2.5
    start_jitter_h: float = 0.5
    extra_sessions: float = 0.6
    extra_length: float = 0.4

    def windows(self, rng: np.random.Generator, days: int) -> list[tuple[float, float]]:
        """One client's sorted, disjoint (start_s, end_s) windows over ``days`` days."""
        horizon = days * DAY_S
        if self.mode == "always":
            return [(0.0, horizon)]
        typical_s = 3600.0 * self.mean_session_h * math.exp(rng.normal(0.0, self.client_spread)
                                                            - self.client_spread**2 / 2)
        if rng.random() < self.evening_fraction:
            hour = rng.normal(self.evening_hour, self.evening_sd_h)
        else:
            hour = rng.uniform(0.0, 24.0)
        raw: list[tuple[float, float]] = []
        for day in range(-1, days):  # day -1: a session that began the evening before t = 0
            start = day * DAY_S + 3600.0 * (hour + rng.normal(0.0, self.start_jitter_h))
            raw.append((start, start + typical_s * math.exp(rng.normal(0.0, self.day_spread))))
            for _ in range(rng.poisson(self.extra_sessions)):
                start = day * DAY_S + rng.uniform(0.0, DAY_S)
                length = self.extra_length * typical_s * math.exp(rng.normal(0.0, self.day_spread))
                raw.append((start, start + length))
        merged: list[tuple[float, float]] = []
        for start, end in sorted(raw):
            start, end = max(start, 0.0), min(end, horizon)
            if end <= start:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged
