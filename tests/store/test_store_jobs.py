from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.exc import IntegrityError

from control_plane.store import JobRecord, Store


def test_create_and_get_job(store: Store) -> None:
    created = store.create_job("j1", "mnist", "alice", '{"demand": 4}', "ab" * 32, 12.5)

    assert created == JobRecord(
        "j1", "mnist", "alice", '{"demand": 4}', "ab" * 32, "registered", 0, 12.5, None
    )
    assert store.get_job("j1") == created
    assert store.get_job("missing") is None


def test_duplicate_job_id_is_rejected(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    with pytest.raises(IntegrityError):
        make_job("j1")


def test_list_jobs_in_registration_order_and_without_finished(
    store: Store, make_job: Callable[..., JobRecord]
) -> None:
    make_job("late", created_at=30.0)
    make_job("early", created_at=10.0)
    make_job("middle", created_at=20.0)
    store.set_job_state("middle", "completed", finished_at=40.0)
    store.set_job_state("early", "running")

    assert [job.job_id for job in store.list_jobs()] == ["early", "middle", "late"]
    assert [job.job_id for job in store.list_jobs(include_finished=False)] == ["early", "late"]


def test_set_job_state_and_rounds_done(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    store.set_rounds_done("j1", 3)
    store.set_job_state("j1", "cancelled", finished_at=99.0)

    job = store.get_job("j1")
    assert job is not None
    assert (job.state, job.rounds_done, job.finished_at) == ("cancelled", 3, 99.0)


def test_updating_a_missing_job_raises(store: Store) -> None:
    with pytest.raises(KeyError, match="missing"):
        store.set_job_state("missing", "running")
    with pytest.raises(KeyError, match="missing"):
        store.set_rounds_done("missing", 1)


def test_unknown_job_state_is_rejected_by_the_database(
    store: Store, make_job: Callable[..., JobRecord]
) -> None:
    make_job("j1")
    with pytest.raises(IntegrityError):
        store.set_job_state("j1", "finished")
