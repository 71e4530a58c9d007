from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from sqlalchemy.exc import IntegrityError

from control_plane.store import AttemptEnd, BindingOutcome, BindingRecord, JobRecord, Store


def test_a_batch_of_1000_bindings_is_one_quick_call(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    rows = [BindingRecord("j1", 0, 0, f"client-{i}", bound_at=100.0 + i) for i in range(1000)]

    started = time.perf_counter()
    store.record_bindings(rows)
    elapsed = time.perf_counter() - started

    stored = store.bindings("j1")
    assert elapsed < 2.0, f"1000 bindings took {elapsed:.2f}s"
    assert [b.client_id for b in stored] == [f"client-{i}" for i in range(1000)]
    assert all(b.id is not None and b.outcome == "bound" for b in stored)


def test_a_failing_batch_writes_nothing(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    rows = [BindingRecord("j1", 0, 0, "ok", 1.0), BindingRecord("j1", 0, 0, "bad", 1.0, outcome="lost")]
    with pytest.raises(IntegrityError):
        store.record_bindings(rows)
    assert store.bindings("j1") == []


def test_finish_bindings_sets_outcomes(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    store.record_bindings([BindingRecord("j1", 0, 0, c, 100.0) for c in ("a", "b", "c")])
    store.record_bindings([BindingRecord("j1", 0, 1, "a", 200.0)])  # same client, a retried attempt

    store.finish_bindings(
        [
            BindingOutcome("j1", 0, 0, "a", "completed", 150.0, num_samples=32.0),
            BindingOutcome("j1", 0, 0, "b", "dropped", 160.0),
        ]
    )

    got = {(b.attempt, b.client_id): (b.outcome, b.finished_at, b.num_samples) for b in store.bindings("j1")}
    assert got == {
        (0, "a"): ("completed", 150.0, 32.0),
        (0, "b"): ("dropped", 160.0, None),
        (0, "c"): ("bound", None, None),
        (1, "a"): ("bound", None, None),
    }


def test_bindings_of_one_round(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    make_job("j2")
    store.record_bindings(
        [
            BindingRecord("j1", 0, 0, "a", 1.0),
            BindingRecord("j1", 1, 0, "a", 2.0),
            BindingRecord("j1", 1, 0, "b", 3.0),
            BindingRecord("j2", 1, 0, "c", 4.0),
        ]
    )

    assert [b.client_id for b in store.bindings("j1", round=1)] == ["a", "b"]
    assert [b.round for b in store.bindings("j1")] == [0, 1, 1]


def test_tasks_done_counts_completed_bindings_per_client(
    store: Store, make_job: Callable[..., JobRecord]
) -> None:
    make_job("j1")
    make_job("j2")
    store.record_bindings(
        [
            BindingRecord("j1", 0, 0, "a", 1.0, outcome="completed", finished_at=2.0, num_samples=8.0),
            BindingRecord("j2", 0, 0, "a", 1.0),
            BindingRecord("j1", 1, 0, "b", 3.0),
            BindingRecord("j1", 1, 0, "c", 3.0),
        ]
    )
    store.finish_bindings(
        [
            BindingOutcome("j2", 0, 0, "a", "completed", 5.0, num_samples=4.0),
            BindingOutcome("j1", 1, 0, "b", "completed", 6.0, num_samples=4.0),
            BindingOutcome("j1", 1, 0, "c", "released", 6.0),
        ]
    )

    # a: two completions (one written completed, one finished later); b: one; c released: not counted.
    assert store.tasks_done_by_client() == {"a": 2, "b": 1}


def test_empty_batches_are_no_ops(store: Store) -> None:
    store.record_bindings([])
    store.finish_bindings([])
    assert store.tasks_done_by_client() == {}


def test_an_ended_attempt_releases_only_its_bindings_still_bound(
    store: Store, make_job: Callable[..., JobRecord]
) -> None:
    make_job("j1")
    store.record_bindings([BindingRecord("j1", 0, attempt, client, 1.0) for attempt in (0, 1) for client in "ab"])
    store.finish_bindings([BindingOutcome("j1", 0, 0, "a", "completed", 2.0, 5.0)])
    store.release_bindings([AttemptEnd("j1", 0, 0, 3.0)])
    outcomes = {(b.attempt, b.client_id): (b.outcome, b.finished_at) for b in store.bindings("j1")}
    assert outcomes == {(0, "a"): ("completed", 2.0), (0, "b"): ("released", 3.0),
                        (1, "a"): ("bound", None), (1, "b"): ("bound", None)}
