"""``control_plane.scheduling.matching.offer_candidates``: the offers a client gets, in the policy's order (the live
binder and the simulator both call it)."""

from __future__ import annotations

from control_plane.scheduling.matching import offer_candidates
from policies import load_policy
from propius.specs import Constraints


def test_offers_follow_the_policy_order_and_skip_full_and_ineligible_jobs(view, ctx) -> None:
    jobs = [view("a", registered_at=1.0), view("full", registered_at=2.0, bound=13), view("b", registered_at=3.0),
            view("phones-with-8gb", registered_at=4.0, public=Constraints.model_validate({"ram": {"min": 8}})),
            view("c", registered_at=5.0)]
    offers = offer_candidates({"ram": 4}, jobs, load_policy("fifo"), ctx, 4)
    assert [job.job_id for job in offers] == ["a", "b", "c"]


def test_a_joined_round_gives_its_offer_place_to_the_next_job(view, ctx) -> None:
    """Five eligible FIFO jobs, four offers: the client already joined the first one's round (a bind
    there would be refused), so the fifth job is offered in its place."""
    jobs = [view(name, registered_at=float(i)) for i, name in enumerate("abcde")]
    fifo = load_policy("fifo")
    assert [job.job_id for job in offer_candidates({}, jobs, fifo, ctx, 4)] == ["a", "b", "c", "d"]
    offers = offer_candidates({}, jobs, fifo, ctx, 4, joined=lambda job: job.job_id == "a")
    assert [job.job_id for job in offers] == ["b", "c", "d", "e"]
