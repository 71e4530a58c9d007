"""How far the order has put a job behind FIFO: the time its rounds lost to jobs registered after it.

Any order other than FIFO lets a newer job take a client that FIFO would have given an older one. That
costs the older job only while its round is short of clients: a round attempt would have had its
``demand``-th client at the ``demand``-th of its own binds and the ones it was passed over for together,
and it lost the time from then to when it really had it (or, if it never did, to its close). In a class
barely larger than the round, one client lost to a newer job costs a whole task of that job, not a
fraction of the wait. Summed over a job's attempts, and counted as it grows in the open one, this is an
estimate, measured rather than predicted, of how much longer than under FIFO the job has taken so far
(the ``fifo_lag`` plug-in bounds it).

A bind passes over, as FIFO would have served it, the oldest open round with a free slot whose public
constraints admit the client and that it has not joined, when that round's job was registered before the
one the client bound to and the policy ranked it after that one. A round ranked before it was offered to
the client first, which declined it (private constraints, checked on the device) or was kept from it by
the policy's dispatch rules, as it would have been under FIFO. A client the scheduler has not placed in its
eligibility classes yet passes nobody over.

Both drivers compute it the same way (the live binder at Accept, carried on the ``client_bound`` event
to every shard; the simulator at its bind) and count it on the passed-over round's :class:`Attempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from control_plane.scheduling.attempts import Attempt
from policies import JobView

__all__ = ["fifo_filled_at", "lost_s", "passed_over", "view_fields"]


def passed_over(
    bound_job_id: str, classes: Container[str], ordered: Sequence[JobView], joined: Callable[[JobView], bool],
) -> str | None:
    """The job FIFO would have given this bind instead of ``bound_job_id``, if it is older; None if none.

    ``classes``: the eligibility keys admitting the client; ``ordered``: the open rounds before the bind, in
    the policy's order; ``joined``: whether the client already joined a view's round (a bind there would be
    refused). Only rounds ranked after the one the client took count: those ranked before it were offered
    first, and the client declined them (its private constraints) or the policy kept them from it.
    """
    bound: JobView | None = None
    oldest: tuple[float, str] | None = None
    for view in ordered:
        if bound is None:
            bound = view if view.job_id == bound_job_id else None
            continue
        key = (view.registered_at, view.job_id)
        if (key < (oldest or (bound.registered_at, bound.job_id)) and view.open_slots > 0
                and view.eligibility_key in classes and not joined(view)):
            oldest = key
    return oldest[1] if oldest is not None else None


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
