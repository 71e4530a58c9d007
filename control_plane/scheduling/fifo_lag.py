"""How far the order has put a job behind FIFO: the time its rounds lost to jobs registered after it.

Any order other than FIFO lets a newer job take a client that FIFO would have given an older one. That
costs the older job only while its round is short of clients: a round attempt would have had its
``demand``-th client at the ``demand``-th of its own binds and the ones it was passed over for together,
and it lost the time from then to when it really had it (or, if it never did, to its close). In a class
barely larger than the round, one client lost to a newer job costs a whole task of that job, not a
fraction of the wait. Summed over a job's attempts, and counted as it grows in the open one, this is an
estimate, measured rather than predicted, of how much longer than under FIFO the job has taken so far
(the ``fifo_lag`` plug-in bounds it).

A bind passes over, as FIFO would have served it, the oldest of the rounds the policy would offer the client
that it ranked after the one the client took, registered before the one the client bound to and still short
of ``demand`` under FIFO (its binds and the passes already counted on it): once those would have filled the
oldest round, FIFO would have given the next client to the next-oldest, so the pass spills over to it rather
than being lost on a round that FIFO had already filled. A round ranked before it was offered to the client
first, which declined it (private constraints, checked on the device), as it would have under FIFO. A round
the policy would not offer this client at all is not passed over either: what keeps the client from it is a
dispatch rule (a client too slow for its deadline, or about to go offline, that the round would likely have
lost), not the order, and FIFO's round would not have been done sooner for having it. Counting those made a
large job on an overloaded pool (policy-20jobs' job-09, 1.01x its FIFO JCT) measure half its time lost;
without them, a quarter. A client the live scheduler has not seen in a supply estimate yet passes nobody
over.

Both drivers compute it the same way (the live binder at Accept, carried on the ``client_bound`` event
to every shard; the simulator at its bind) and count it on the passed-over round's :class:`Attempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from control_plane.scheduling.attempts import Attempt
from policies import JobView

__all__ = ["fifo_filled_at", "lost_s", "passed_over", "view_fields"]


def passed_over(bound_job_id: str, ranked: Sequence[JobView], short: Callable[[str], bool]) -> str | None:
    """The job FIFO would have given this bind instead of ``bound_job_id``, if it is older; None if none.

    ``ranked``: the rounds the policy would offer the client as it binds, first offered first
    (:func:`~control_plane.scheduling.matching.ranked_offers`). Only those ranked after the one it took
    count: those ranked before it were offered first, and the client declined them (its private constraints).
    ``short``: whether a job's open round is still short of ``demand`` under FIFO
    (:meth:`~control_plane.scheduling.attempts.Attempt.short_under_fifo`).
    """
    at = next((i for i, view in enumerate(ranked) if view.job_id == bound_job_id), None)
    if at is None:
        return None
    bound = ranked[at]

    def order(view: JobView) -> tuple[float, str]:
        return view.registered_at, view.job_id

    older = [view for view in ranked[at + 1:] if order(view) < order(bound) and short(view.job_id)]
    return min(older, key=order).job_id if older else None


def fifo_filled_at(attempt: Attempt) -> float | None:
    """When the attempt would have held ``demand`` clients had the binds that passed it over come to it
    (None: even with them it would not yet)."""
    if not attempt.passed_at:
        return None
    merged = sorted(attempt.bind_times + attempt.passed_at)
    return merged[attempt.demand - 1] if len(merged) >= attempt.demand else None


def lost_s(attempt: Attempt, now: float) -> float:
    """Seconds the attempt has lost by ``now`` (its close, for a closed one) to the binds it was passed over
    for: from when they would have filled it to when it filled (or to ``now``, while it has not)."""
    fifo = fifo_filled_at(attempt)
    if fifo is None:
        return 0.0
    return max(0.0, (attempt.filled_at if attempt.filled_at is not None else now) - fifo)


def view_fields(closed_s: float, attempt: Attempt | None) -> tuple[float, float | None]:
    """A job's ``(lost_to_newer_s, fifo_filled_at)`` for its view: ``closed_s`` (its closed attempts' losses)
    plus the open ``attempt``'s once it filled; while it has not, when FIFO would have filled it, so a
    policy adds the loss still growing at its ``ctx.now``."""
    if attempt is None:
        return closed_s, None
    if attempt.filled_at is not None:
        return closed_s + lost_s(attempt, attempt.filled_at), None
    return closed_s, fifo_filled_at(attempt)
