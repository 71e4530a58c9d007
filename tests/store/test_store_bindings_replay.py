"""A shard that takes over a dead shard's rounds writes the dead one's journal again (delivery is at least
once): a binding written twice is one row, and an outcome is written once."""

from __future__ import annotations

from collections.abc import Callable

from control_plane.store import BindingOutcome, BindingRecord, JobRecord, Store


def test_a_replayed_binding_is_one_row_and_keeps_its_outcome(store: Store, make_job: Callable[..., JobRecord]) -> None:
    make_job("j1")
    bound = [BindingRecord("j1", 0, 0, client, 100.0) for client in ("a", "b")]
    store.record_bindings(bound)
    store.finish_bindings([BindingOutcome("j1", 0, 0, "a", "completed", 101.0, 3.0)])

    store.record_bindings([*bound, BindingRecord("j1", 0, 0, "c", 102.0)])  # the batch again, and a new one
    store.finish_bindings([BindingOutcome("j1", 0, 0, "a", "dropped", 103.0, None)])  # a late reaper's verdict

    rows = {row.client_id: row for row in store.bindings("j1")}
    assert len(store.bindings("j1")) == 3
    assert (rows["a"].outcome, rows["a"].num_samples) == ("completed", 3.0)
    assert rows["b"].outcome == rows["c"].outcome == "bound"
