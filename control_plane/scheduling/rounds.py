"""How a round attempt is opened, and how long a client without an offer waits before it asks again.

Both drivers open rounds through :func:`plan_round` (slots, results that close it, deadline) and
spread the retries of clients that found nothing with :func:`retry_delay`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from propius.specs import JobSpec

__all__ = ["RoundPlan", "plan_round", "retry_delay"]


@dataclass(frozen=True)
class RoundPlan:
    demand: int  # results wanted
    target: int  # clients that may bind: demand with the job's over-selection
    min_results: int  # results that close the round
    opened_at: float
    deadline_at: float  # the round fails (or closes with what it has) here


def plan_round(spec: JobSpec, demand: int, now: float) -> RoundPlan:
    """A round of ``demand`` results opened at ``now``: it may take ``schedule_timeout_s`` to bind its
    clients and ``execution_timeout_s`` for them to deliver."""
    return RoundPlan(
        demand=demand, target=spec.bind_target(demand), min_results=min(spec.results_to_close, demand),
        opened_at=now, deadline_at=now + spec.schedule_timeout_s + spec.execution_timeout_s,
    )


def retry_delay(base_s: float, rng: random.Random) -> float:
    """A uniform draw from [base/2, base], so clients that found nothing do not come back in lock-step."""
    return base_s * rng.uniform(0.5, 1.0)
