"""The control plane exports a completed job through the exporter its builder gives it, and only then.

Fake exporters stand in for :func:`propius.trace.export.data_point_exporter` (tested end to end in
test_trace_export.py and test_trace_sdk_request.py): these tests pin when the plane calls one, what it
hands it and what CompleteJob answers when there is none or it fails.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from control_plane.app import ControlPlane
from control_plane.store import Store
from propius.config import Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec

SPEC = JobSpec.parse({"name": "wired", "rounds": 1, "demand": 1})


class Recorder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.calls: list[tuple[Store, str]] = []

    async def __call__(self, store: Store, job_id: str, *, placement: object = None,
                       tier: object = None) -> Path | None:
        self.calls.append((store, job_id))
        return self.folder / job_id


async def _complete(plane: ControlPlane, *, export_trace: bool, cancel: bool = False) -> tuple[str, pb.JobInfo]:
    async with grpc.aio.insecure_channel(plane.address) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        reply = await stub.RegisterJob(pb.RegisterJobRequest(spec_json=SPEC.to_json()))
        ref = pb.JobRef(job_id=reply.job_id, job_token=reply.job_token, export_trace=export_trace)
        info = await (stub.CancelJob(ref) if cancel else stub.CompleteJob(ref))
    return reply.job_id, info


async def test_a_requested_export_goes_through_the_given_exporter(settings: Settings, tmp_path) -> None:
    exporter = Recorder(tmp_path / "points")
    async with ControlPlane(settings, trace_exporter=exporter) as plane:
        asked, info = await _complete(plane, export_trace=True)
        assert info.trace_dir == str(tmp_path / "points" / asked)
        assert exporter.calls == [(plane.store, asked)]
        _, plain = await _complete(plane, export_trace=False)
        _, cancelled = await _complete(plane, export_trace=True, cancel=True)
    assert plain.trace_dir == "" and cancelled.trace_dir == ""  # not asked for; not completed
    assert [job_id for _, job_id in exporter.calls] == [asked]


async def test_trace_export_dir_exports_every_completed_job(settings: Settings, tmp_path) -> None:
    exporter = Recorder(tmp_path / "points")
    every_job = settings.model_copy(update={"trace_export_dir": tmp_path})
    async with ControlPlane(every_job, trace_exporter=exporter) as plane:
        job_id, info = await _complete(plane, export_trace=False)
    assert info.trace_dir == str(tmp_path / "points" / job_id)
    assert [job_id for _, job_id in exporter.calls] == [job_id]


async def test_without_an_exporter_a_request_is_answered_without_a_trace(settings: Settings, tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="control_plane.app"):
        plane = ControlPlane(settings.model_copy(update={"trace_export_dir": tmp_path}))
    assert "no trace exporter" in caplog.text
    async with plane:
        _, info = await _complete(plane, export_trace=True)
    assert info.state == pb.JOB_STATE_COMPLETED and info.trace_dir == ""
    assert not list(tmp_path.glob("wired*"))


async def test_a_failing_exporter_is_logged_not_the_rpcs_error(settings: Settings, caplog) -> None:
    async def broken(store: Store, job_id: str, *, placement: object = None, tier: object = None) -> Path | None:
        raise RuntimeError("disk full")

    async with ControlPlane(settings, trace_exporter=broken) as plane:
        with caplog.at_level(logging.ERROR, logger="control_plane.job_service"):
            _, info = await _complete(plane, export_trace=True)
    assert info.state == pb.JOB_STATE_COMPLETED and info.trace_dir == ""
    assert "trace export of job" in caplog.text and "disk full" in caplog.text
