"""Conversions between the control plane's typed state and the protobuf wire messages."""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from control_plane.errors import InvalidArgument
from control_plane.scheduling.state import ActiveJob, RoundState
from propius.fabric.state import Allocation, FabricState
from propius.proto import propius_pb2 as pb
from propius.specs import ClientProfile, describe_validation_error

__all__ = ["fabric_recovery", "job_info", "job_placement", "profile_from_pb", "profile_to_pb", "redacted_spec_json",
           "round_info"]

_ROUND_STATES = {"open": pb.ROUND_STATE_OPEN, "closed": pb.ROUND_STATE_CLOSED, "failed": pb.ROUND_STATE_FAILED}
_JOB_STATES = {
    "registered": pb.JOB_STATE_REGISTERED, "running": pb.JOB_STATE_RUNNING,
    "completed": pb.JOB_STATE_COMPLETED, "cancelled": pb.JOB_STATE_CANCELLED,
}


def round_info(state: RoundState | None) -> pb.RoundInfo:
    if state is None:
        return pb.RoundInfo()
    return pb.RoundInfo(
        job_id=state.job_id, round=state.round, attempt=state.attempt, state=_ROUND_STATES[state.state],
        demand=state.demand, target=state.target, bound=state.bound, results=state.results,
        deadline_unix=state.deadline_at, started_unix=state.started_at, closed_unix=state.closed_at,
    )


def redacted_spec_json(job: ActiveJob) -> str:
    """The job's spec as anyone but its owner sees it: no private requirements, no task config."""
    return job.spec.model_dump_json(by_alias=True, exclude_none=True,
                                    exclude={"task": True, "requirements": {"private"}})


def job_info(job: ActiveJob, state: RoundState | None, *, redact: bool = False,
             placement: pb.JobPlacement | None = None) -> pb.JobInfo:
    """``redact``: the caller is not the job's owner (see :func:`redacted_spec_json`); ``placement``: where
    its cloud accelerators are (:func:`job_placement`)."""
    return pb.JobInfo(
        job_id=job.job_id, name=job.spec.name, owner=job.spec.owner, state=_JOB_STATES[job.state],
        rounds_done=job.rounds_done, rounds_total=job.spec.rounds or 0, current_round=round_info(state),
        spec_json=redacted_spec_json(job) if redact else job.spec_json, created_unix=job.registered_at,
        finished_unix=job.finished_at or 0.0, placement=placement,
    )


def job_placement(job_id: str, requested: int, allocation: Allocation | None, waiting_reason: str,
                  waiting_since: float, state: FabricState | None) -> pb.JobPlacement:
    """A job's accelerators (rank order) and their racks, or why it waits."""
    accelerators = list(allocation.accelerators) if allocation is not None else []
    racks = sorted({state.rack_of(acc) for acc in accelerators}) if state is not None else []
    return pb.JobPlacement(job_id=job_id, requested=requested, accelerators=accelerators, racks=racks,
                           how=allocation.how if allocation is not None else "", waiting_reason=waiting_reason,
                           waiting_since_unix=waiting_since)


def fabric_recovery(job_id: str, detail: dict[str, Any]) -> pb.FabricRecovery:
    """A recovery's event detail (:func:`control_plane.fabric_manager.recovery_detail`) on the wire."""
    return pb.FabricRecovery(kind=str(detail["kind"]), job_id=job_id, failed=str(detail["failed"]),
                             spare=str(detail["spare"]), components=dict(detail["components"]),
                             time_s=float(detail["time_s"]), throughput=float(detail["throughput"]))


def profile_from_pb(message: pb.ClientProfile) -> ClientProfile:
    for name, value in message.numeric.items():
        if not math.isfinite(value):
            raise InvalidArgument(f"profile.numeric.{name}", "must be a finite number")
    try:
        return ClientProfile(
            client_id=message.client_id, device_class=message.device_class or "edge",
            numeric=dict(message.numeric), labels=dict(message.labels),
        )
    except ValidationError as error:
        spec_error = describe_validation_error(error)
        raise InvalidArgument(f"profile.{spec_error.field}", spec_error.message) from None


def profile_to_pb(profile: ClientProfile) -> pb.ClientProfile:
    return pb.ClientProfile(
        client_id=profile.client_id, device_class=profile.device_class.value,
        numeric=profile.numeric, labels=profile.labels,
    )
