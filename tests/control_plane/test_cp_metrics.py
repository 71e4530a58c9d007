"""Prometheus metrics count what the control plane did."""

from __future__ import annotations

import numpy as np

from data_plane.tensors import encode
from propius.proto import propius_pb2 as pb


def _value(plane, name: str, labels: dict[str, str] | None = None) -> float:
    return plane.metrics.registry.get_sample_value(name, labels or {}) or 0.0


async def test_binds_updates_and_rounds_are_counted(plane, stubs):
    job_id, token = await stubs.register(name="metered", demand=1, over_selection=1.0)
    await stubs.jobs.StartRound(pb.StartRoundRequest(job_id=job_id, job_token=token))
    await stubs.publish(job_id, token, 0, {"w": np.zeros(3, np.float32)})
    checkin, accept = await stubs.bind("m1")
    full = await stubs.check_in("m2")
    assert not full.offers
    update = {"w": np.ones(3, np.float32)}
    await stubs.upload("m1", checkin.session_token, accept, update, 2.0)
    info, _ = await stubs.aggregate(job_id, token, 0)
    assert info.state == pb.ROUND_STATE_CLOSED
    assert _value(plane, "propius_accepts_total", {"outcome": "bound"}) == 1
    assert _value(plane, "propius_check_ins_total", {"outcome": "none"}) == 1
    assert _value(plane, "propius_updates_total", {"outcome": "accepted"}) == 1
    assert _value(plane, "propius_rounds_total", {"state": "closed"}) == 1
    assert _value(plane, "propius_update_bytes_total") == len(encode(update))
