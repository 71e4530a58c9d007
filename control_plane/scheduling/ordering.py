"""The policy-ordered view of open rounds that every check-in (live) or idle client (simulated) reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from policies import JobView, Policy, SchedulingContext

__all__ = ["order_open_rounds"]


def order_open_rounds(
    policy: Policy, views: list[JobView], ctx: SchedulingContext, fastest_fill: Callable[[JobView], float | None],
) -> list[JobView]:
    """``views`` in the policy's order; the head carries ``fastest_fill(head)`` when the policy wants it.

    Only the head gets the estimate: it is every eligible client's first offer, so a busy client that
    frees up does come to it (see :mod:`control_plane.scheduling.fastest_fill`).
    """
    ordered = policy.order(views, ctx)
    if ordered and policy.wants_fastest_fill:
        ordered[0] = dataclasses.replace(ordered[0], fastest_fill_at=fastest_fill(ordered[0]))
    return ordered
