"""Why a job waits: its eligible clients, what keeps them busy, and what its rounds ended with.

Computed on the job owner's side from what the control plane already answers (``GetJob``,
``ListJobs``, ``ListClients``): a client is *eligible* when it checked in recently and its public
attributes meet the job's public requirements, the same test the scheduler's supply estimate makes.
``propius submit`` uses :func:`eligibility` to warn about (or, with ``--strict``, refuse) a job that
cannot fill a round, and ``propius jobs explain`` prints :func:`explain`'s lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from propius.proto import propius_pb2 as pb
from propius.specs import ClientProfile, JobSpec

__all__ = ["Eligibility", "eligibility", "explain", "round_failure"]


@dataclass(frozen=True)
class Eligibility:
    """The recent clients a job's public requirements admit, and the jobs those clients are bound to."""

    eligible: int
    busy: Mapping[str, int]  # job id -> eligible clients bound to that job's open round

    def shortfall(self, spec: JobSpec) -> int:
        """Clients missing for a round of ``spec.demand`` results (0: enough are known)."""
        return max(0, spec.demand - self.eligible)


def eligibility(spec: JobSpec, clients: Iterable[pb.ClientInfo], job_id: str = "") -> Eligibility:
    """Count the ``clients`` (``ListClients``' recent check-ins) that ``spec`` admits; clients bound to
    ``job_id`` itself are not busy for it."""
    eligible = 0
    busy: Counter[str] = Counter()
    for info in clients:
        profile = info.profile
        try:
            attributes = ClientProfile(client_id=profile.client_id, device_class=profile.device_class or "edge",
                                       numeric=dict(profile.numeric), labels=dict(profile.labels)).attributes()
        except ValidationError:
            continue
        if spec.requirements.public.admits(attributes):
            eligible += 1
            if info.bound_job_id and info.bound_job_id != job_id:
                busy[info.bound_job_id] += 1
    return Eligibility(eligible, dict(busy))


def round_failure(info: pb.RoundInfo, spec: JobSpec, supply: Eligibility) -> str:
    """One line: how a round attempt failed and the likeliest reason."""
    line = f"round {info.round} attempt {info.attempt} failed with {info.results} of {spec.results_to_close} results"
    if supply.eligible < spec.results_to_close:
        return f"{line}: only {supply.eligible} eligible clients known"
    if supply.busy:
        return f"{line}: {sum(supply.busy.values())} of the {supply.eligible} eligible clients are busy with other jobs"
    return f"{line}: bound clients dropped out or missed the deadline"


def _names(jobs: Iterable[pb.JobInfo]) -> dict[str, str]:
    return {job.job_id: job.name for job in jobs}


def waiting_for(spec: JobSpec, supply: Eligibility, jobs: Iterable[pb.JobInfo], window_s: float) -> str:
    """One line: eligible clients known against the demand, and who keeps the eligible ones busy."""
    line = f"{supply.eligible} eligible clients checked in within {window_s:g} s (demand {spec.demand})"
    if supply.busy:
        names = _names(jobs)
        held = ", ".join(f"{count} by {names.get(job_id, '?')} ({job_id})"
                         for job_id, count in sorted(supply.busy.items(), key=lambda item: -item[1]))
        line += f"; busy: {held}"
    return line


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
    if supply.shortfall(spec):
        lines.append(f"cannot fill a round: {supply.shortfall(spec)} more eligible clients needed; start clients "
                     "whose attributes meet requirements.public, or lower demand")
    return lines
