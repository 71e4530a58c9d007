from __future__ import annotations

from collections.abc import Callable

from policies import JobView, SchedulingContext, SrsfPolicy


def test_srsf_serves_the_smallest_remaining_service_first(
    view: Callable[..., JobView], ctx: SchedulingContext
) -> None:
    jobs = [
        view("near-done", registered_at=2.0, rounds_total=10, rounds_done=8, demand=50),
        view("short", registered_at=5.0, rounds_total=5, rounds_done=0, demand=10),
        view("forever", registered_at=0.0, rounds_total=None, demand=1),
        view("tied-earlier", registered_at=1.0, rounds_total=3, rounds_done=1, demand=50),
        view("forever-later", registered_at=3.0, rounds_total=None, demand=1),
    ]

    # Remaining service = remaining_rounds x demand:
    #   near-done     (10 - 8) x 50 = 100, registered 2.0
    #   short         (5 - 0) x 10  =  50
    #   tied-earlier  (3 - 1) x 50  = 100, registered 1.0: ties near-done, earlier, so first
    #   forever, forever-later: open-ended = inf, last, FIFO between them (0.0 before 3.0)
    assert [j.job_id for j in SrsfPolicy().order(jobs, ctx)] == [
        "short",
        "tied-earlier",
        "near-done",
        "forever",
        "forever-later",
    ]


def test_srsf_counts_rounds_not_results(view: Callable[..., JobView], ctx: SchedulingContext) -> None:
    many_small = view("many-small", registered_at=1.0, rounds_total=20, demand=2)
    few_large = view("few-large", registered_at=2.0, rounds_total=2, demand=100)

    # 20 x 2 = 40 beats 2 x 100 = 200, although few-large has fewer rounds left.
    assert [j.job_id for j in SrsfPolicy().order([few_large, many_small], ctx)] == ["many-small", "few-large"]
