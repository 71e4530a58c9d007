from __future__ import annotations

from control_plane.store import EventRecord, Store


def test_events_filtered_by_job(store: Store) -> None:
    store.record_events(
        [
            EventRecord(1.0, "job_registered", job_id="j1"),
            EventRecord(2.0, "client_bound", job_id="j1", client_id="a", detail_json='{"round": 0}'),
            EventRecord(3.0, "job_registered", job_id="j2"),
            EventRecord(4.0, "client_seen", client_id="b"),
        ]
    )

    assert [(e.at, e.kind) for e in store.events()] == [
        (1.0, "job_registered"),
        (2.0, "client_bound"),
        (3.0, "job_registered"),
        (4.0, "client_seen"),
    ]
    bound = store.events("j1")[1]
    assert (bound.client_id, bound.detail_json) == ("a", '{"round": 0}')
    assert [e.at for e in store.events(job_id="j2")] == [3.0]
    assert [e.at for e in store.events(kind="job_registered")] == [1.0, 3.0]
    assert [e.at for e in store.events("j1", limit=1, kind="job_registered")] == [1.0]


def test_events_limit_keeps_the_newest_oldest_first(store: Store) -> None:
    store.record_events([EventRecord(float(i), "tick") for i in range(10)])
    store.record_events([EventRecord(10.0, "tick")])

    assert [e.at for e in store.events(limit=3)] == [8.0, 9.0, 10.0]
    assert store.events("nobody") == []
