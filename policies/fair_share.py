"""Weighted fair share per tenant (job owner), with caps and borrowing, within eligibility.

Within one eligibility class, each tenant with a job there is entitled to ``supply x w / W`` of the
class's clients (``w`` its weight, ``W`` the sum over the tenants present). Its usage is the clients
its jobs there hold now (``bound``). Jobs are served by ``usage / entitlement``, least served first,
so a tenant that runs many jobs does not get more clients than one that runs a single job.

- Caps: a tenant whose usage in a class reached ``cap x supply`` is not served in it (a hard limit,
  e.g. for a tenant that pays for a fraction of the pool).
- Borrowing: by default a tenant may exceed its entitlement when the others leave clients unused
  (work conservation); with ``borrowing=False`` a tenant at its entitlement waits instead.

Shares are per class because a tenant whose jobs only the fastest phones can serve cannot be
compensated with slow phones. Tenants without a weight get 1. Ties fall back to FIFO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from policies.base import JobView, Policy, SchedulingContext
from policies.options import Fraction, Positive

__all__ = ["FairSharePolicy", "TenantShare", "tenant_shares"]


@dataclass(frozen=True)
class TenantShare:
    usage: int  # clients the tenant's jobs in the class hold now
    entitlement: float  # clients it is entitled to in the class
    supply: int

    @property
    def ratio(self) -> float:
        return self.usage / self.entitlement if self.entitlement > 0 else float(self.usage)


def tenant_shares(
    jobs: Sequence[JobView], ctx: SchedulingContext, weights: Mapping[str, float]
) -> dict[tuple[str, str], TenantShare]:
    """(owner, eligibility_key) -> that tenant's share of the class."""
    usage: dict[tuple[str, str], int] = {}
    supply: dict[str, int] = {}
    for job in jobs:
        usage[(job.owner, job.eligibility_key)] = usage.get((job.owner, job.eligibility_key), 0) + job.bound
        supply[job.eligibility_key] = ctx.class_supply(job)
    total_weight: dict[str, float] = {}
    for owner, key in usage:
        total_weight[key] = total_weight.get(key, 0.0) + weights.get(owner, 1.0)
    return {
        (owner, key): TenantShare(used, supply[key] * weights.get(owner, 1.0) / total_weight[key], supply[key])
        for (owner, key), used in usage.items()
    }


class FairSharePolicy(Policy):
    """Weighted fair share per tenant within each eligibility class (see the module docstring).

    Parameters
    ----------
    weights : Mapping[str, float] or None
        Owner -> weight (> 0); owners not named weigh 1.
    caps : Mapping[str, float] or None
        Owner -> the largest fraction of a class (in (0, 1]) its jobs may hold.
    borrowing : bool, default True
        Whether a tenant may exceed its entitlement when the others leave clients unused.
    """

    name: ClassVar[str] = "fair-share"

    def __init__(
        self, weights: Mapping[str, Positive] | None = None, caps: Mapping[str, Fraction] | None = None,
        borrowing: bool = True,
    ) -> None:
        self.weights = dict(weights or {})
        self.caps = dict(caps or {})
        self.borrowing = borrowing

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        """The job's share ratio as if it were its tenant's only job in its class."""
        return tenant_shares([job], ctx, self.weights)[(job.owner, job.eligibility_key)].ratio

    def order(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[JobView]:
        """Like the default, but scored by the tenant's total usage in the class, not the job's alone."""
        shares = tenant_shares(jobs, ctx, self.weights)

        def share(job: JobView) -> TenantShare:
            return shares[(job.owner, job.eligibility_key)]

        kept = [job for job in jobs if self.filter(job, ctx) and self._admits(job.owner, share(job))]
        return sorted(kept, key=lambda job: (share(job).ratio, job.registered_at, job.job_id))

    def _admits(self, owner: str, share: TenantShare) -> bool:
        cap = self.caps.get(owner)
        if cap is not None and share.usage >= cap * share.supply:
            return False
        return self.borrowing or share.usage < share.entitlement
