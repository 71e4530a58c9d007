"""α-β cost of AllReduce algorithms: Ring, recursive halving-doubling (RHD) and StragglAR.

A transfer of ``b`` bytes costs ``α + β·b``; a round costs one transfer of its largest chunk (one-port,
full-duplex, homogeneous any-to-any links). All times are measured from the straggler's arrival: Ring and
RHD start then; StragglAR's ReduceScatter among the ``n-1`` ready ranks started when they arrived, so only
the part of it not hidden by the delay ``d`` is exposed: ``max(0, T_RS(n-1) - d) + T_completion``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from propius.fabric.alpha_beta import LinkCost
from propius.fabric.model import Fabric

__all__ = ["LinkCost", "break_even_delay", "placement_link", "reduce_scatter", "rhd", "ring", "stragglar",
           "stragglar_completion"]


def placement_link(fabric: Fabric, accelerators: Sequence[str]) -> LinkCost | None:
    """The α-β of the slowest hop of a ring over ``accelerators`` (rank order) on ``fabric``: a declared
    scale-up or torus link between two neighbours, else the sender's NIC rail (rail = its local index) with
    the latency of its NIC link onto it (1 µs if none is declared). ``None`` when a hop has neither."""
    by_id = {acc.id: acc for acc in fabric.accelerators}
    rails = {rail.index: rail for rail in fabric.rails}
    direct = {frozenset((link.a, link.b)): link for link in fabric.links if link.kind in ("scale-up", "torus")}
    nic = {(link.a, link.b): link.latency_us for link in fabric.links if link.kind == "nic-rail"}
    pairs = list(zip(accelerators, accelerators[1:], strict=False))
    if len(accelerators) > 2:
        pairs.append((accelerators[-1], accelerators[0]))
    hops: list[LinkCost] = []
    for a, b in pairs:
        if (link := direct.get(frozenset((a, b)))) is not None:
            hops.append(LinkCost.from_link(link))
        elif a in by_id and (rail := rails.get(by_id[a].index)) is not None:
            hops.append(LinkCost.from_rail(rail, nic.get((a, rail.id), 1.0)))
        else:
            return None
    return max(hops, key=lambda hop: (hop.beta_s_per_byte, hop.alpha_s, hop.ocs)) if hops else None


def ring(n: int, size: float, link: LinkCost) -> float:
    """Ring AllReduce: ``2(n-1)`` rounds of ``S/n`` bytes."""
    return 2 * (n - 1) * link.transfer(size / n)


def rhd(n: int, size: float, link: LinkCost) -> float:
    """Recursive halving-doubling over the largest power of two ``p <= n``: ``2·log2 p`` rounds moving
    ``2(p-1)/p·S`` bytes; for ``n > p`` the extra ranks first hand their whole buffer to a partner and get
    the result back (two full-buffer transfers)."""
    p = 1 << (n.bit_length() - 1)
    steps = int(math.log2(p))
    core = 2 * steps * link.alpha_s + 2 * (p - 1) / p * size * link.beta_s_per_byte
    return core + (2 * link.transfer(size) if n > p else 0.0)


def reduce_scatter(members: int, size: float, link: LinkCost) -> float:
    """Ring ReduceScatter among ``members`` ranks: ``members-1`` rounds of ``S/members`` bytes."""
    return (members - 1) * link.transfer(size / members)


def stragglar_completion(n: int, size: float, link: LinkCost, rounds: int | None = None) -> float:
    """StragglAR's completion after the straggler arrives: ``rounds`` (default the paper's
    ``n - 2 + ceil(log2 n)``) rounds of ``S/(n-1)`` bytes."""
    if rounds is None:
        rounds = n - 2 + math.ceil(math.log2(n))
    return rounds * link.transfer(size / (n - 1))


def stragglar(n: int, size: float, link: LinkCost, delay_s: float, rounds: int | None = None) -> float:
    """StragglAR from the straggler's arrival, given its delay behind the ``n-1``-th arrival."""
    exposed = max(0.0, reduce_scatter(n - 1, size, link) - delay_s)
    return exposed + stragglar_completion(n, size, link, rounds)


def break_even_delay(n: int, size: float, link: LinkCost, rounds: int | None = None) -> float:
    """The smallest delay at which StragglAR is no slower than the better of Ring and RHD (``inf`` if never)."""
    gap = min(ring(n, size, link), rhd(n, size, link)) - stragglar_completion(n, size, link, rounds)
    if gap <= 0:
        return math.inf
    return max(0.0, reduce_scatter(n - 1, size, link) - gap)
