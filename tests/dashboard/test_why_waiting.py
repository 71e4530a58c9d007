"""The one "why waiting" implementation: eligibility counts and the policy's reason, as pure functions."""

from __future__ import annotations

from control_plane.scheduling.state import RoundState
from control_plane.scheduling.why_waiting import Eligibility, count_eligible, policy_reason, waiting_line
from policies import JobView
from propius.specs import Constraints

SMALL = Constraints.model_validate({"ram": {"max": 8}})


def _round(job_id: str, bound: int, target: int, state: str = "open") -> RoundState:
    return RoundState(job_id=job_id, round=0, attempt=0, state=state, demand=target, target=target, min_results=target,
                      bound=bound, results=0, started_at=0.0, deadline_at=60.0, closed_at=0.0, model_digest="",
                      aggregate_digest="")


def _view(job_id: str, bound: int, target: int) -> JobView:
    return JobView(job_id=job_id, name=job_id.upper(), owner="o", registered_at=0.0, priority=0.0, demand=target,
                   target=target, bound=bound, results=0, rounds_total=None, rounds_done=0, eligibility_key="{}",
                   public=Constraints(), supply=0)


def test_eligible_clients_and_who_keeps_them_busy() -> None:
    clients = [({"ram": 4.0}, ""), ({"ram": 4.0}, "a"), ({"ram": 4.0}, "me"), ({"ram": 16.0}, "a"), ({}, "")]
    supply = count_eligible(SMALL, clients, job_id="me")
    assert supply == Eligibility(3, {"a": 1})  # a client without the attribute is not admitted by a bound
    assert supply.shortfall(5) == 2
    assert waiting_line(5, supply, {"a": "keyboard"}, 120) == (
        "3 eligible clients checked in within 120 s (demand 5); busy: 1 by keyboard (a)")


def test_the_policy_reason_names_the_position_the_filter_and_a_full_round() -> None:
    ordered = [_view("a", 0, 2), _view("b", 2, 2), _view("c", 1, 4)]
    assert policy_reason("c", _round("c", 1, 4), ordered, "fifo") == (
        "position 3 of 3 in the fifo policy's order; offered after A (2 free) to clients eligible for both")
    assert policy_reason("a", _round("a", 0, 2), ordered, "fifo") == "position 1 of 3 in the fifo policy's order"
    assert policy_reason("d", _round("d", 0, 2), ordered, "fair-share") == (
        "held back by the fair-share policy's filter: its round is offered to no client for now")
    assert policy_reason("b", _round("b", 2, 2), ordered, "fifo") == "all 2 slots bound: waiting for results (0/2)"
    assert policy_reason("e", _round("e", 0, 2, "closed"), ordered, "fifo") == (
        "round 0 closed: the job's driver starts the next")
