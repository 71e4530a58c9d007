"""Why a job waits: its eligible clients, what keeps them busy, and what its rounds ended with.

Computed on the job owner's side from what the control plane already answers (``GetJob``,
``ListJobs``, ``ListClients``), with the rules of :mod:`control_plane.scheduling.why_waiting`, which the
control plane's dashboard uses too.
``propius submit`` uses :func:`eligibility` to warn about (or, with ``--strict``, refuse) a job that
cannot fill a round, and ``propius jobs explain`` prints :func:`explain`'s lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import ValidationError

from control_plane.scheduling.why_waiting import Eligibility, count_eligible, failure_line, shortfall_line, waiting_line
from propius.proto import propius_pb2 as pb
from propius.specs import AttributeValue, ClientProfile, JobSpec

__all__ = ["Eligibility", "eligibility", "explain", "round_failure", "waiting_for"]


def _attributes(clients: Iterable[pb.ClientInfo]) -> Iterator[tuple[dict[str, AttributeValue], str]]:
    """(public attributes, bound job id) of each client whose profile is valid."""
    for info in clients:
        profile = info.profile
        try:
            attributes = ClientProfile(client_id=profile.client_id, device_class=profile.device_class or "edge",
                                       numeric=dict(profile.numeric), labels=dict(profile.labels)).attributes()
        except ValidationError:
            continue
        yield attributes, info.bound_job_id


def eligibility(spec: JobSpec, clients: Iterable[pb.ClientInfo], job_id: str = "") -> Eligibility:
    """Count the ``clients`` (``ListClients``' recent check-ins) that ``spec`` admits; clients bound to
    ``job_id`` itself are not busy for it."""
    return count_eligible(spec.requirements.public, _attributes(clients), job_id)


def round_failure(info: pb.RoundInfo, spec: JobSpec, supply: Eligibility) -> str:
    """One line: how a round attempt failed and the likeliest reason."""
    return failure_line(info.round, info.attempt, info.results, spec.results_to_close, supply)


def waiting_for(spec: JobSpec, supply: Eligibility, jobs: Iterable[pb.JobInfo], window_s: float) -> str:
    """One line: eligible clients known against the demand, and who keeps the eligible ones busy."""
    return waiting_line(spec.demand, supply, {job.job_id: job.name for job in jobs}, window_s)


def explain(job: pb.JobInfo, supply: Eligibility, jobs: Iterable[pb.JobInfo], window_s: float) -> list[str]:
    """What ``job`` waits for, one fact a line (``propius jobs explain``)."""
    spec = JobSpec.parse(job.spec_json)
    state = pb.JobState.Name(job.state).removeprefix("JOB_STATE_").lower()
    total = job.rounds_total or "∞"
    lines = [f"job {job.name} ({job.job_id}): {state}, {job.rounds_done}/{total} rounds done"]
    if job.state in (pb.JOB_STATE_COMPLETED, pb.JOB_STATE_CANCELLED):
        return [*lines, "it has finished: it waits for nothing"]
    current = job.current_round
    lines.append(waiting_for(spec, supply, jobs, window_s))
    if current.job_id and current.attempt > 0:
        lines.append(f"round {current.round} failed {current.attempt} time(s) before attempt {current.attempt}")
    if not current.job_id:
        lines.append("no round started yet: the job's driver (SDK, `propius submit --wait`) starts them")
    elif current.state == pb.ROUND_STATE_OPEN:
        lines.append(f"round {current.round} attempt {current.attempt} open: {current.bound}/{current.target} "
                     f"clients bound, {current.results}/{current.demand} results")
    elif current.state == pb.ROUND_STATE_FAILED:
        lines.append(round_failure(current, spec, supply))
    else:
        lines.append(f"round {current.round} closed with {current.results} results: the driver starts the next")
    if (short := shortfall_line(spec.demand, supply)) is not None:
        lines.append(short)
    return lines
