"""The power/cost model: counts by hand on small builds, photonic cheaper at the reference rate, the ratio
growing with the link rate, and everything growing with the number of GPUs."""

from __future__ import annotations

import pytest

from propius.fabric.power import PowerParams, compare, electrical, photonic


def test_counts_for_128_gpus_on_8_rails() -> None:
    # 16 hosts per rail: one rail-aligned 64-port leaf each (16 of its 32 downlinks used), and two spines
    # for the 128 uplinks; transceivers at the NICs, the leaves' downlinks and both ends of 128 uplinks.
    e = electrical(128, 8, 400)
    assert (e.switches, e.switch_tiers, e.transceivers) == (10, 2, 128 + 128 + 2 * 128)
    assert e.power_w == pytest.approx(10 * 2524 + 512 * 10)
    o = photonic(128, 8, 400)
    assert (o.ocs_units, o.ocs_ports, o.transceivers) == (8, 256, 128) and o.note == ""
    assert o.power_w == pytest.approx(256 * 75 / 192 + 128 * 10)
    assert o.cost_usd == pytest.approx(256 * 520 + 128 * 219)


def test_rail_only_fits_a_rail_in_one_switch() -> None:
    e = electrical(512, 8, 400, rail_only=True)  # 64 hosts per rail: one 64-port switch each
    assert (e.switches, e.switch_tiers, e.transceivers) == (8, 1, 2 * 512)


def test_a_rail_beyond_one_ocs_unit_is_flagged() -> None:
    assert "more than one 384-port unit" in photonic(2048, 8, 400).note


@pytest.mark.parametrize("gpus", [128, 512, 2048])
def test_photonic_is_cheaper_at_the_reference_rate_and_the_ratio_grows_with_rate(gpus: int) -> None:
    ratios = [compare(gpus, 8, gbps) for gbps in (100, 200, 400, 800, 1600)]
    assert ratios[2]["power_ratio"] > 1 and ratios[2]["cost_ratio"] > 1
    for lower, higher in zip(ratios, ratios[1:], strict=False):
        assert higher["power_ratio"] > lower["power_ratio"] and higher["cost_ratio"] > lower["cost_ratio"]


def test_rate_independent_constants_give_a_flat_ratio() -> None:
    flat = PowerParams(rate_exponent=0.0)
    assert compare(512, 8, 100, flat) == pytest.approx(compare(512, 8, 1600, flat))


def test_power_and_cost_grow_with_gpus() -> None:
    for build in (electrical, photonic):
        costs = [build(n, 8, 400) for n in (128, 512, 2048, 8192)]
        assert all(a.power_w < b.power_w and a.cost_usd < b.cost_usd for a, b in zip(costs, costs[1:], strict=False))
