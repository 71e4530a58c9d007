from __future__ import annotations

from collections.abc import Callable

from policies import FifoPolicy, JobView, SchedulingContext


def test_fifo_serves_in_registration_order(view: Callable[..., JobView], ctx: SchedulingContext) -> None:
    jobs = [
        view("b", registered_at=30.0, priority=9.0),
        view("a", registered_at=10.0, demand=500),
        view("c", registered_at=20.0, rounds_total=None),
        view("d", registered_at=10.0),
    ]

    # By registered_at: a and d (10) tie, job_id puts a first; then c (20), then b (30).
    # Priority, demand and open-endedness do not matter to FIFO.
    assert [j.job_id for j in FifoPolicy().order(jobs, ctx)] == ["a", "d", "c", "b"]


def test_fifo_of_nothing_is_nothing(ctx: SchedulingContext) -> None:
    assert FifoPolicy().order([], ctx) == []
