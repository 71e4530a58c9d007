from __future__ import annotations

from collections.abc import Callable

from policies import JobView, LasPolicy, SchedulingContext, load_policy


def test_las_serves_the_least_attained_service_first(view: Callable[..., JobView], ctx: SchedulingContext) -> None:
    jobs = [
        view("veteran", registered_at=1.0, rounds_done=4, demand=10),
        view("newcomer", registered_at=9.0, rounds_done=0, demand=500),
        view("forever", registered_at=2.0, rounds_total=None, rounds_done=1, demand=20),
        view("tied-later", registered_at=3.0, rounds_done=2, demand=10),
    ]

    # Attained = rounds_done x demand: veteran 40, newcomer 0, forever 20, tied-later 20 (FIFO: forever first).
    assert [j.job_id for j in LasPolicy().order(jobs, ctx)] == ["newcomer", "forever", "tied-later", "veteran"]
    assert isinstance(load_policy("las"), LasPolicy)
