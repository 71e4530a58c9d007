from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from policies import JobView, SchedulingContext
from propius.specs import Constraints


@pytest.fixture
def view() -> Callable[..., JobView]:
    """Build a JobView: a 5-round job of demand 10 with free slots; override what a test is about."""

    def make(job_id: str, **overrides: Any) -> JobView:
        fields: dict[str, Any] = {
            "job_id": job_id,
            "name": job_id,
            "owner": "alice",
            "registered_at": 100.0,
            "priority": 0.0,
            "demand": 10,
            "target": 13,
            "bound": 0,
            "results": 0,
            "rounds_total": 5,
            "rounds_done": 0,
            "eligibility_key": "{}",
            "public": Constraints(),
            "supply": 50,
        }
        return JobView(**(fields | overrides))

    return make


@pytest.fixture
def ctx() -> SchedulingContext:
    return SchedulingContext(now=1000.0, supply_by_class={"{}": 50})
