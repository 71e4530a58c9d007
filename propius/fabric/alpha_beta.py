"""α-β times of the collectives a phase runs, on a link of latency α and bandwidth B bytes/s
(``LinkCost.beta_s_per_byte`` = 1/B).

``size`` is the bytes per member (the buffer for a ring collective, the data a member sends for an
all-to-all, the message for a send-recv). On an OCS rail a circuit carries a port's full bandwidth and
a port sends on one circuit and receives on one circuit at a time, so:

- ring all-reduce ``2(n−1)(α + S/(nB))``; all-gather and reduce-scatter ``(n−1)(α + S/(nB))``;
- send-recv ``α + S/B``;
- all-to-all *direct* (any-to-any, or one circuit permutation per shift) ``(n−1)(α + S/(nB))``;
- all-to-all *ring relay* over one cyclic permutation: ``(n−1)α + S(n−1)/(2B)`` — a chunk for the
  member ``d`` hops away crosses ``d`` circuits, so each circuit carries ``S(n−1)/2``.
"""

from __future__ import annotations

from dataclasses import dataclass

from propius.fabric.model import Link, Rail
from propius.fabric.phases import Collective

__all__ = ["LinkCost", "all_to_all_relay", "collective_time"]


@dataclass(frozen=True)
class LinkCost:
    """``alpha_s``: seconds per message; ``beta_s_per_byte``: seconds per byte; ``ocs``: an optical-circuit
    path (a different peer each round would need a reconfiguration per round). One definition for the Opus
    planner and the aggregator shards' algorithm selector (``data_plane.collectives.cost``)."""

    alpha_s: float
    beta_s_per_byte: float
    ocs: bool = False

    @classmethod
    def of(cls, latency_us: float, bandwidth_gbps: float, ocs: bool = False) -> LinkCost:
        return cls(latency_us * 1e-6, 8.0 / (bandwidth_gbps * 1e9), ocs)

    @classmethod
    def from_link(cls, link: Link) -> LinkCost:
        return cls.of(link.latency_us, link.bandwidth_gbps)

    @classmethod
    def from_rail(cls, rail: Rail, latency_us: float) -> LinkCost:
        return cls.of(latency_us, rail.bandwidth_gbps, ocs=rail.kind == "ocs")

    def transfer(self, nbytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * nbytes


def collective_time(collective: Collective, n: int, size: float, link: LinkCost) -> float:
    """Seconds for one collective over ``n`` members with every member on its own full-rate link."""
    if collective == Collective.SEND_RECV:
        return link.transfer(size)
    if n < 2:
        return 0.0
    step = link.transfer(size / n)
    if collective == Collective.ALL_REDUCE:
        return 2 * (n - 1) * step
    return (n - 1) * step  # all-gather, reduce-scatter, direct all-to-all


def all_to_all_relay(n: int, size: float, link: LinkCost) -> float:
    """All-to-all forwarded along one ring of circuits (no reconfiguration inside the phase)."""
    if n < 2:
        return 0.0
    return (n - 1) * link.alpha_s + size * (n - 1) / 2 * link.beta_s_per_byte
