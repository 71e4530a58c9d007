"""Why a job waits: its eligible clients, who keeps them busy, and where the policy puts it.

One implementation for both readers: the control plane's dashboard (from its own caches) and
``propius jobs explain`` / ``propius submit`` (:mod:`propius.explain`, from RPC answers). A client is
*eligible* when it checked in recently and its public attributes meet the job's public requirements,
the same test the scheduler's supply estimate makes. Pure functions over value types: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from control_plane.scheduling.state import RoundState
from policies import JobView
from propius.specs import AttributeValue, Constraints

__all__ = ["Eligibility", "count_eligible", "failure_line", "policy_reason", "shortfall_line", "tally", "waiting_line"]


@dataclass(frozen=True)
class Eligibility:
    """The recent clients a job's public requirements admit, and the jobs those clients are bound to."""

    eligible: int
    busy: Mapping[str, int]  # job id -> eligible clients bound to that job's open round

    def shortfall(self, demand: int) -> int:
        """Clients missing for a round of ``demand`` results (0: enough are known)."""
        return max(0, demand - self.eligible)


def tally(bound_jobs: Iterable[str], job_id: str = "") -> Eligibility:
    """The eligibility of a job whose eligible clients are bound to ``bound_jobs`` (one entry per client,
    "" for an idle one); clients bound to ``job_id`` itself are not busy for it."""
    eligible = 0
    busy: Counter[str] = Counter()
    for bound_job_id in bound_jobs:
        eligible += 1
        if bound_job_id and bound_job_id != job_id:
            busy[bound_job_id] += 1
    return Eligibility(eligible, dict(busy))


def count_eligible(
    public: Constraints, clients: Iterable[tuple[Mapping[str, AttributeValue], str]], job_id: str = "",
) -> Eligibility:
    """:func:`tally` over the ``clients`` ((attributes, bound job id or "") of the recent check-ins) that
    ``public`` admits."""
    return tally((bound_job_id for attributes, bound_job_id in clients if public.admits(dict(attributes))), job_id)


def waiting_line(demand: int, supply: Eligibility, names: Mapping[str, str], window_s: float) -> str:
    """One line: eligible clients known against the demand, and who keeps the eligible ones busy."""
    line = f"{supply.eligible} eligible clients checked in within {window_s:g} s (demand {demand})"
    if supply.busy:
        held = ", ".join(f"{count} by {names.get(job_id, '?')} ({job_id})"
                         for job_id, count in sorted(supply.busy.items(), key=lambda item: -item[1]))
        line += f"; busy: {held}"
    return line


def shortfall_line(demand: int, supply: Eligibility) -> str | None:
    """One line when the known clients cannot fill a round of ``demand`` results, else None."""
    missing = supply.shortfall(demand)
    if not missing:
        return None
    return (f"cannot fill a round: {missing} more eligible clients needed; start clients whose attributes meet "
            "requirements.public, or lower demand")


def failure_line(round_: int, attempt: int, results: int, results_to_close: int, supply: Eligibility) -> str:
    """One line: how a round attempt failed and the likeliest reason."""
    line = f"round {round_} attempt {attempt} failed with {results} of {results_to_close} results"
    if supply.eligible < results_to_close:
        return f"{line}: only {supply.eligible} eligible clients known"
    if supply.busy:
        return f"{line}: {sum(supply.busy.values())} of the {supply.eligible} eligible clients are busy with other jobs"
    return f"{line}: bound clients dropped out or missed the deadline"


def policy_reason(job_id: str, state: RoundState, ordered: Sequence[JobView], policy: str) -> str:
    """One line: where the policy puts the job's open round ``state`` in its ``ordered`` output (the open
    rounds it serves, best first), and which rounds with free slots come before it."""
    if state.state != "open":
        return f"round {state.round} {state.state}: the job's driver starts the next"
    if state.bound >= state.target:
        return f"all {state.target} slots bound: waiting for results ({state.results}/{state.demand})"
    position = next((i for i, view in enumerate(ordered) if view.job_id == job_id), None)
    if position is None:
        return f"held back by the {policy} policy's filter: its round is offered to no client for now"
    ahead = [view for view in ordered[:position] if view.open_slots > 0]
    line = f"position {position + 1} of {len(ordered)} in the {policy} policy's order"
    if ahead:
        names = ", ".join(f"{view.name} ({view.open_slots} free)" for view in ahead[:3])
        more = f" and {len(ahead) - 3} more" if len(ahead) > 3 else ""
        line += f"; offered after {names}{more} to clients eligible for both"
    return line
