"""A restarted control plane opens a new Store on the same URL and must find everything."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing

from sqlalchemy import create_engine, text

from control_plane.store import BindingOutcome, BindingRecord, EventRecord, RoundRecord, Store


def test_state_survives_reopening_the_store(open_store: Callable[[], Store]) -> None:
    with closing(open_store()) as first:
        first.create_job("done", "old", "alice", "{}", "1" * 64, 1.0)
        first.set_job_state("done", "completed", finished_at=5.0)
        first.create_job("live", "new", "bob", '{"demand": 3}', "2" * 64, 2.0)
        first.set_job_state("live", "running")
        first.set_rounds_done("live", 1)
        first.start_round(RoundRecord("live", 0, 0, 3, 4, 10.0, 20.0))
        first.finish_round("live", 0, 0, "closed", results=3, closed_at=15.0)
        first.start_round(RoundRecord("live", 1, 0, 3, 4, 30.0, 40.0, model_digest="sha256:m1"))
        first.record_bindings([BindingRecord("live", 1, 0, c, 31.0) for c in ("a", "b")])
        first.finish_bindings([BindingOutcome("live", 1, 0, "a", "completed", 35.0, num_samples=16.0)])
        first.record_events([EventRecord(2.0, "job_registered", job_id="live")])
        expected_rounds = first.rounds("live")

    with closing(open_store()) as second:
        live = second.list_jobs(include_finished=False)
        assert [(j.job_id, j.state, j.rounds_done, j.spec_json) for j in live] == [
            ("live", "running", 1, '{"demand": 3}')
        ]
        assert second.get_job("done") is not None
        assert second.rounds("live") == expected_rounds
        assert [(r.round, r.state, r.model_digest) for r in second.rounds("live")][-1] == (1, "open", "sha256:m1")
        assert [(b.client_id, b.outcome) for b in second.bindings("live", round=1)] == [
            ("a", "completed"),
            ("b", "bound"),
        ]
        assert second.tasks_done_by_client() == {"a": 1}
        assert [e.kind for e in second.events("live")] == ["job_registered"]
        # ids keep counting after a restart rather than colliding with rows written before it
        second.record_events([EventRecord(50.0, "control_plane_restarted")])
        ids = [e.id for e in second.events()]
        assert len(set(ids)) == len(ids) == 2


def test_a_store_made_by_an_earlier_release_gains_the_new_columns(backend) -> None:
    with closing(backend.open()) as first:
        first.create_job("j1", "job", "alice", "{}", "1" * 64, 1.0)
        first.start_round(RoundRecord("j1", 0, 0, 3, 4, 10.0, 20.0))
    table = f'"{backend.schema}".rounds' if backend.schema else "rounds"
    engine = create_engine(backend.url)
    with engine.begin() as connection:
        connection.execute(text(f"ALTER TABLE {table} DROP COLUMN aggregate_digest"))  # as that release made it
    engine.dispose()

    with closing(backend.open()) as second:
        assert [(r.round, r.aggregate_digest) for r in second.rounds("j1")] == [(0, "")]
        closed = second.finish_round("j1", 0, 0, "closed", results=3, closed_at=15.0, aggregate_digest="agg")
        assert closed.aggregate_digest == "agg"
