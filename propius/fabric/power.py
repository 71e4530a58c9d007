"""Network power and cost of a rail fabric: electrical packet switches vs photonic rails (OCS).

What is counted, for ``N`` GPUs on ``k`` rails (``H = N / k`` hosts, one NIC port per GPU):

- *Electrical, rail-optimized* (the baseline of Photonic Rails / Opus): a non-blocking folded Clos of
  ``radix``-port switches over all ``N`` NIC ports whose leaves are rail-aligned (a rail's NICs fill
  ``ceil(H / (radix/2))`` leaves of their own) and whose upper tiers join the rails. Tiers ``t``: the
  fewest with ``N ≤ 2·(radix/2)^t``, at least 2 when ``k > 1``; each middle tier has ``ceil(N / (radix/2))``
  switches, the top ``ceil(N / radix)``. Every cabled port holds a transceiver: ``N`` at the NICs, ``N``
  at the leaves' downlinks, and both ends of the ``(t − 1)·N`` switch-to-switch links. A switch draws
  and costs its full radix whether or not every port is cabled.
- *Electrical, rail-only*: one such Clos per rail, no tier joining the rails (reported for context).
- *Photonic rails*: one OCS per rail with ``ocs_ports_per_nic`` ports per NIC, fibre straight from the
  NIC's transceiver through the OCS to the peer's: transceivers only at the ``N`` NICs. OCS power and
  cost are per port and independent of the link rate (the switch steers light, whatever it carries).

Rate scaling: switch-port and transceiver power and cost are given at ``ref_gbps`` and scale as
``(rate / ref_gbps) ** rate_exponent`` (per-bit energy and price fall as lane rates rise, so the
exponent is below 1). The OCS terms do not scale, which is why the ratio grows with the link rate.

Default constants (all parameters; the first four are the public constants of the Opus authors'
energy analysis, which cites fs.com list prices and a Polatis 6000n; the rest are our assumptions):
400G transceiver 10 W / $219; 64×400G switch 2524 W / $37,299 (per port 39.4 W / $583); OCS port
75/192 W / $520; two OCS ports per NIC (transmit and receive fibres); ``rate_exponent`` 0.7 (assumed: a
doubling of the lane rate costs ~1.6× the power and price); OCS unit of 384 ports (assumed; a rail
larger than one unit is flagged, since a circuit joins ports of one unit only).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FabricCost", "PowerParams", "compare", "electrical", "photonic"]

Positive = Annotated[float, Field(gt=0)]


class PowerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ref_gbps: Positive = 400.0
    transceiver_w: Positive = 10.0
    transceiver_usd: Positive = 219.0
    switch_radix: Annotated[int, Field(ge=4)] = 64
    switch_port_w: Positive = 2524 / 64
    switch_port_usd: Positive = 37299 / 64
    ocs_port_w: Positive = 75 / 192
    ocs_port_usd: Positive = 520.0
    ocs_ports_per_nic: Annotated[int, Field(ge=1)] = 2
    ocs_unit_ports: Annotated[int, Field(ge=2)] = 384
    rate_exponent: Annotated[float, Field(ge=0, le=2)] = 0.7

    def scale(self, gbps: float) -> float:
        return (gbps / self.ref_gbps) ** self.rate_exponent


class FabricCost(BaseModel):
    """Counts and totals of one build."""

    model_config = ConfigDict(frozen=True)

    name: str
    switches: int = 0
    switch_tiers: int = 0
    ocs_units: int = 0
    ocs_ports: int = 0
    transceivers: int = 0
    power_w: float
    cost_usd: float
    note: str = ""


def _tiers(ports: int, radix: int) -> int:
    """The fewest tiers of a non-blocking folded Clos over ``ports``: one switch row, or ``2·(radix/2)^t``."""
    if ports <= radix:
        return 1
    tiers = 2
    while ports > 2 * (radix // 2) ** tiers:
        tiers += 1
    return tiers


def _switches(ports: int, radix: int, tiers: int, leaves: int) -> int:
    """Switches of a ``tiers``-tier folded Clos whose first tier is ``leaves`` (rail-aligned) switches."""
    if tiers == 1:
        return math.ceil(ports / radix)
    return leaves + (tiers - 2) * math.ceil(ports / (radix // 2)) + math.ceil(ports / radix)


def electrical(gpus: int, rails: int, gbps: float, p: PowerParams | None = None, *,
               rail_only: bool = False) -> FabricCost:
    """Rail-optimized (or rail-only) packet-switched fabric; see the module docstring."""
    p = p or PowerParams()
    hosts = math.ceil(gpus / rails)
    leaves_per_rail = math.ceil(hosts / (p.switch_radix // 2))
    if rail_only:
        tiers = _tiers(hosts, p.switch_radix)
        switches = rails * _switches(hosts, p.switch_radix, tiers, leaves_per_rail)
    else:
        tiers = max(_tiers(gpus, p.switch_radix), 2 if rails > 1 else 1)
        switches = _switches(gpus, p.switch_radix, tiers, rails * leaves_per_rail)
    transceivers = 2 * gpus + 2 * (tiers - 1) * gpus
    s = p.scale(gbps)
    power = switches * p.switch_radix * p.switch_port_w * s + transceivers * p.transceiver_w * s
    cost = switches * p.switch_radix * p.switch_port_usd * s + transceivers * p.transceiver_usd * s
    return FabricCost(name="electrical rail-only" if rail_only else "electrical rail-optimized", switches=switches,
                      switch_tiers=tiers, transceivers=transceivers, power_w=power, cost_usd=cost)


def photonic(gpus: int, rails: int, gbps: float, p: PowerParams | None = None) -> FabricCost:
    """Photonic rails: one OCS per rail, transceivers at the NICs only."""
    p = p or PowerParams()
    hosts = math.ceil(gpus / rails)
    per_rail = hosts * p.ocs_ports_per_nic
    units = rails * math.ceil(per_rail / p.ocs_unit_ports)
    ports = rails * per_rail
    s = p.scale(gbps)
    power = ports * p.ocs_port_w + gpus * p.transceiver_w * s
    cost = ports * p.ocs_port_usd + gpus * p.transceiver_usd * s
    note = "" if per_rail <= p.ocs_unit_ports else (f"a rail needs {per_rail} OCS ports, more than one "
                                                    f"{p.ocs_unit_ports}-port unit")
    return FabricCost(name="photonic rails", ocs_units=units, ocs_ports=ports, transceivers=gpus, power_w=power,
                      cost_usd=cost, note=note)


def compare(gpus: int, rails: int, gbps: float, p: PowerParams | None = None) -> dict[str, float]:
    """Electrical rail-optimized over photonic: power and cost ratios."""
    e, o = electrical(gpus, rails, gbps, p), photonic(gpus, rails, gbps, p)
    return {"power_ratio": e.power_w / o.power_w, "cost_ratio": e.cost_usd / o.cost_usd}
