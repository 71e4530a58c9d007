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
        RoundRecord("j1", 0, 0, 10, 13, 100.0, 220.0, "closed", 10, 150.0, '{"loss": 0.5}', "sha256:abc")
    ]


def test_rounds_are_ordered_by_round_then_attempt(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    for round, attempt in [(1, 1), (0, 0), (1, 0), (2, 0)]:
        store.start_round(opened("j1", round, attempt))

    assert [(r.round, r.attempt) for r in store.rounds("j1")] == [(0, 0), (1, 0), (1, 1), (2, 0)]
    assert store.rounds("other") == []


def test_a_round_attempt_starts_once(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    store.start_round(opened("j1", 0))
    with pytest.raises(IntegrityError):
        store.start_round(opened("j1", 0))


def test_a_round_needs_its_job(store: Store) -> None:
    with pytest.raises(IntegrityError):
        store.start_round(opened("missing", 0))


def test_finishing_a_missing_round_raises(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    with pytest.raises(KeyError, match="j1/0.0"):
        store.finish_round("j1", 0, 0, "closed", results=1, closed_at=1.0)
    with pytest.raises(KeyError, match="j1/0.0"):
        store.set_round_model("j1", 0, 0, "sha256:abc")
