"""TraceRecorder keeps each round's spans to that round, whatever order late events arrive in."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from control_plane.journal import Journal
from control_plane.store import Store
from control_plane.tracing import TraceRecorder


async def test_a_late_update_of_a_closed_round_stays_out_of_the_next(tmp_path: Path) -> None:
    with closing(Store(f"sqlite:///{tmp_path / 'propius.db'}")) as store:
        store.create_job("j", "n", "o", "{}", "0" * 64, 1.0)
        journal = Journal(store)
        recorder = TraceRecorder(journal, max_rounds=10, max_ranks=8)
        recorder.round_started("j", 4, 0, 100.0)
        recorder.update_delivered("j", 4, "a", None, 101.0, 101.0, 101.5, 10, 10)
        recorder.round_closed("j", 4, 0, 102.0, 101.6, 1, 2)
        recorder.round_started("j", 5, 0, 103.0)
        recorder.update_delivered("j", 4, "late", None, 103.1, 103.1, 103.2, 10, 10)  # counted after the close
        recorder.round_closed("j", 4, 0, 103.3, 103.3, 1, 2)  # a second close of round 4: ignored
        recorder.update_delivered("j", 5, "b", None, 104.0, 104.0, 104.5, 10, 10)
        recorder.round_closed("j", 5, 0, 105.0, 104.6, 1, 1)
        await journal.flush()
        events = store.trace_events("j")
    steps = sorted((e.round, e.rank) for e in events if e.name.startswith("ProfilerStep#"))
    assert steps == [(4, 0), (4, 1), (5, 0), (5, 1)]
    assert all(e.name == f"ProfilerStep#{e.round}" for e in events if e.cat == "user_annotation")
    assert not [e for e in events if "late" in e.args_json]
