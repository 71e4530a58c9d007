"""``offer_candidates``: which open jobs a client is offered, shared by the live binder and the simulator."""

from __future__ import annotations

from control_plane.matching import offer_candidates
from policies import JobView, SchedulingContext, load_policy
from propius.specs import Constraints


def _job(job_id: str, registered_at: float, **overrides: object) -> JobView:
    fields: dict = {
        "job_id": job_id, "name": job_id, "owner": "alice", "registered_at": registered_at, "priority": 0.0,
        "demand": 10, "target": 13, "bound": 0, "results": 0, "rounds_total": 5, "rounds_done": 0,
        "eligibility_key": "{}", "public": Constraints(), "supply": 50,
    }
    return JobView(**(fields | overrides))


def test_offers_follow_the_policy_order_and_skip_full_and_ineligible_jobs() -> None:
    jobs = [_job("a", 1.0), _job("full", 2.0, bound=13), _job("b", 3.0),
            _job("phones-with-8gb", 4.0, public=Constraints.model_validate({"ram": {"min": 8}})), _job("c", 5.0)]
    offers = offer_candidates({"ram": 4}, jobs, load_policy("fifo"), SchedulingContext(now=10.0, supply_by_class={"{}": 50}), 4)
    assert [job.job_id for job in offers] == ["a", "b", "c"]


def test_a_joined_round_gives_its_offer_place_to_the_next_job() -> None:
    """Five eligible FIFO jobs, four offers: the client already joined the first one's round (a bind
    there would be refused), so the fifth job is offered in its place."""
    jobs = [_job(name, float(i)) for i, name in enumerate("abcde")]
    fifo, ctx = load_policy("fifo"), SchedulingContext(now=10.0, supply_by_class={"{}": 50})
    assert [job.job_id for job in offer_candidates({}, jobs, fifo, ctx, 4)] == ["a", "b", "c", "d"]
    offers = offer_candidates({}, jobs, fifo, ctx, 4, joined=lambda job: job.job_id == "a")
    assert [job.job_id for job in offers] == ["b", "c", "d", "e"]
