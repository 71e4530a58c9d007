"""How many spares a rack needs: the smallest K with P(concurrent failures > K within the repair window) <= ε.

Monte Carlo over one repair window: every chip fails on its own with probability ``1 - exp(-λ_chip·W)``,
and every shared-risk group (a host's board, a power feed, a ToR) fails with its own rate, taking all the
chips behind it. A trial's count is the union of failed chips. The rates are parameters; the defaults are
an assumption for illustration (a chip rate of the order reported for large training clusters, counting
every interruption), not a measurement: set them from your fleet's records.

Morphlux sizes K with P(F >= K); the overflow event is F > K (K spares cover K failures), used here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from propius.fabric.model import Fabric, FabricError

__all__ = ["FailureRates", "SpareSizing", "concurrent_failures", "spares_needed"]

Rate = Annotated[float, Field(ge=0)]
HOURS_PER_YEAR = 8760.0


class FailureRates(BaseModel):
    """Failure rates (per element per year) and the repair window W (hours)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chip_per_year: Rate = 0.5
    board_per_year: Rate = 0.05
    power_per_year: Rate = 0.01
    tor_per_year: Rate = 0.01
    repair_hours: Annotated[float, Field(gt=0)] = 168.0

    def probability(self, per_year: float) -> float:
        """P(at least one failure of an element with this rate within the repair window)."""
        return float(1.0 - np.exp(-per_year * self.repair_hours / HOURS_PER_YEAR))


@dataclass(frozen=True)
class SpareSizing:
    """The K chosen, its estimated overflow probability, and P(F > k) for k = 0..len-1."""

    rack: str
    spares: int
    overflow: float
    tail: tuple[float, ...]


def concurrent_failures(fabric: Fabric, rack: str, rates: FailureRates, trials: int, seed: int) -> np.ndarray:
    """Failed chips of ``rack`` per sampled repair window (an int array of length ``trials``)."""
    hosts = [h for h in fabric.hosts if h.rack == rack]
    if not hosts:
        raise FabricError(f"rack {rack!r}", "has no hosts")
    host_of = {h.id: k for k, h in enumerate(hosts)}
    chips = [host_of[a.host] for a in fabric.accelerators if a.host in host_of]
    rng = np.random.default_rng(seed)
    failed = rng.random((trials, len(chips))) < rates.probability(rates.chip_per_year)
    for kind, rate in (("board", rates.board_per_year), ("power", rates.power_per_year), ("tor", rates.tor_per_year)):
        groups = sorted({getattr(h.srg, kind) for h in hosts})
        member = np.array([[getattr(hosts[c].srg, kind) == g for c in chips] for g in groups])
        events = rng.random((trials, len(groups))) < rates.probability(rate)
        failed |= (events.astype(np.int32) @ member.astype(np.int32)) > 0
    return failed.sum(axis=1)


def spares_needed(fabric: Fabric, rack: str, rates: FailureRates, epsilon: float = 0.01,
                  trials: int = 20_000, seed: int = 0) -> SpareSizing:
    """The smallest K with P(F > K) <= ``epsilon`` (estimated from ``trials`` seeded windows)."""
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    counts = concurrent_failures(fabric, rack, rates, trials, seed)
    tail = tuple(float((counts > k).mean()) for k in range(int(counts.max()) + 1))
    k = next(k for k, p in enumerate(tail) if p <= epsilon)
    return SpareSizing(rack, k, tail[k], tail)
