"""Eligibility matching: which open jobs may a client serve, in which order.

Pure functions over :class:`policies.JobView`, shared by the live control plane and the simulator so
both make the same decisions for the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from policies import JobView, Policy, SchedulingContext
from propius.specs import AttributeValue, Constraints

__all__ = ["offer_candidates", "ranked_offers", "supply_by_class"]


def ranked_offers(
    attributes: Mapping[str, AttributeValue],
    ordered_jobs: Sequence[JobView],
    policy: Policy,
    ctx: SchedulingContext,
    joined: Callable[[JobView], bool] | None = None,
) -> list[JobView]:
    """Every job the policy would offer the client, first offered first: those with a free slot whose public
    constraints admit it, ranked by ``policy.rank_for_client`` (which may leave some out).

    Rounds the client already ``joined`` are ranked with the others, then left out (a bind would be
    refused): the policy sees them, so it may keep the client free for such a round's successor
    (``hold_for_tight``), and they do not take the place of an offer the client could accept.
    """
    attrs = dict(attributes)
    eligible = [job for job in ordered_jobs if job.open_slots > 0 and job.public.admits(attrs)]
    ranked = policy.rank_for_client(attrs, eligible, ctx)
    if joined is not None:
        ranked = [job for job in ranked if not joined(job)]
    return ranked


def offer_candidates(
    attributes: Mapping[str, AttributeValue],
    ordered_jobs: Sequence[JobView],
    policy: Policy,
    ctx: SchedulingContext,
    max_offers: int,
    joined: Callable[[JobView], bool] | None = None,
) -> list[JobView]:
    """The first ``max_offers`` of :func:`ranked_offers`: the offers a checking-in client gets."""
    return ranked_offers(attributes, ordered_jobs, policy, ctx, joined)[:max_offers]


def supply_by_class(
    clients: Iterable[Mapping[str, AttributeValue]], classes: Mapping[str, Constraints]
) -> dict[str, int]:
    """How many of the given clients each eligibility class admits (a client may count in several)."""
    counts = dict.fromkeys(classes, 0)
    for attributes in clients:
        attrs = dict(attributes)
        for key, constraints in classes.items():
            if constraints.admits(attrs):
                counts[key] += 1
    return counts
