from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.exc import IntegrityError

from control_plane.store import JobRecord, RoundRecord, Store


def opened(job_id: str, round: int, attempt: int = 0) -> RoundRecord:
    return RoundRecord(job_id, round, attempt, demand=10, target=13, started_at=100.0, deadline_at=220.0)


def test_start_and_finish_round(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    store.start_round(opened("j1", 0))
    store.set_round_model("j1", 0, 0, "sha256:abc")
    store.finish_round("j1", 0, 0, "closed", results=10, closed_at=150.0, metrics_json='{"loss": 0.5}')

    assert store.rounds("j1") == [
        RoundRecord("j1", 0, 0, 10, 13, 100.0, 220.0, "closed", 10, 150.0, '{"loss": 0.5}', "sha256:abc", "")
    ]


def test_rounds_are_ordered_by_round_then_attempt(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    for round, attempt in [(1, 1), (0, 0), (1, 0), (2, 0)]:
        store.start_round(opened("j1", round, attempt))

    assert [(r.round, r.attempt) for r in store.rounds("j1")] == [(0, 0), (1, 0), (1, 1), (2, 0)]
    assert store.rounds("other") == []


def test_a_round_attempt_starts_once(store: Store, make_job: Callable[..., JobRecord]) -> None:
    """A retried start (its reply was lost) leaves the one row as the first start wrote it."""
    make_job("j1")
    store.start_round(opened("j1", 0))
    store.set_round_model("j1", 0, 0, "abc")
    store.start_round(opened("j1", 0))
    assert [(r.round, r.attempt, r.model_digest) for r in store.rounds("j1")] == [(0, 0, "abc")]


def test_a_round_ends_once_and_its_close_advances_the_job(store: Store, make_job: Callable[..., JobRecord]) -> None:
    """The close and ``rounds_done`` commit together; a replayed or competing end keeps the first one."""
    make_job("j1")
    store.start_round(opened("j1", 0))
    closed = store.finish_round("j1", 0, 0, "closed", results=3, closed_at=150.0, aggregate_digest="agg")
    assert (closed.state, closed.results, closed.aggregate_digest) == ("closed", 3, "agg")
    assert store.get_job("j1").rounds_done == 1

    again = store.finish_round("j1", 0, 0, "closed", results=4, closed_at=160.0, aggregate_digest="other")
    failed = store.finish_round("j1", 0, 0, "failed", results=0, closed_at=170.0)
    assert again == failed == closed
    assert store.get_job("j1").rounds_done == 1
    assert store.latest_round("j1") == closed


def test_a_failed_attempt_does_not_advance_the_job(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    store.start_round(opened("j1", 0))
    store.finish_round("j1", 0, 0, "failed", results=1, closed_at=150.0)
    store.start_round(opened("j1", 0, 1))
    assert store.get_job("j1").rounds_done == 0
    assert (store.latest_round("j1").attempt, store.latest_round("j1").state) == (1, "open")
    assert store.latest_round("other") is None


def test_a_round_needs_its_job(store: Store) -> None:
    with pytest.raises(IntegrityError):
        store.start_round(opened("missing", 0))


def test_finishing_a_missing_round_raises(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    with pytest.raises(KeyError, match="j1/0.0"):
        store.finish_round("j1", 0, 0, "closed", results=1, closed_at=1.0)
    with pytest.raises(KeyError, match="j1/0.0"):
        store.set_round_model("j1", 0, 0, "sha256:abc")
