"""The extension points every policy inherits: filter, the deterministic sort, rank_for_client."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from policies import FifoPolicy, JobView, Policy, SchedulingContext


class Constant(Policy):
    """Every job scores the same, so only the tie-breaks decide."""

    name: ClassVar[str] = "constant"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return 0.0


class FifoWithFreeSlots(FifoPolicy):
    """FIFO that holds back jobs whose round is full."""

    def filter(self, job: JobView, ctx: SchedulingContext) -> bool:
        return job.open_slots > 0


def test_equal_scores_fall_back_to_registration_then_job_id(
    view: Callable[..., JobView], ctx: SchedulingContext
) -> None:
    jobs = [view("b", registered_at=2.0), view("c", registered_at=1.0), view("a", registered_at=2.0)]

    # c registered first; a and b tie on time, so job_id decides: a < b.
    assert [j.job_id for j in Constant().order(jobs, ctx)] == ["c", "a", "b"]


def test_filter_is_honoured(view: Callable[..., JobView], ctx: SchedulingContext) -> None:
    jobs = [
        view("full", registered_at=1.0, target=13, bound=13),
        view("open", registered_at=2.0, target=13, bound=12),
        view("overbound", registered_at=3.0, target=13, bound=14),
    ]

    # Only "open" has a free slot (13 - 12 = 1); the others have none.
    assert [j.job_id for j in FifoWithFreeSlots().order(jobs, ctx)] == ["open"]
    assert [j.job_id for j in FifoPolicy().order(jobs, ctx)] == ["full", "open", "overbound"]


def test_rank_for_client_keeps_the_global_order_by_default(
    view: Callable[..., JobView], ctx: SchedulingContext
) -> None:
    jobs = [view("z"), view("a"), view("m")]
    ranked = Constant().rank_for_client({"device_class": "edge", "ram": 4.0}, jobs, ctx)

    assert ranked == jobs
    assert ranked is not jobs


def test_job_view_derived_counts(view: Callable[..., JobView]) -> None:
    assert view("j", target=13, bound=4).open_slots == 9
    assert view("j", target=13, bound=20).open_slots == 0
    assert view("j", rounds_total=5, rounds_done=2).remaining_rounds == 3
    assert view("j", rounds_total=5, rounds_done=7).remaining_rounds == 0
    assert view("j", rounds_total=None, rounds_done=7).remaining_rounds is None
