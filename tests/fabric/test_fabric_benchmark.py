"""The benchmark's own measures (``benchmarks/fabric.py``) on fabrics small enough to check by hand."""

from __future__ import annotations

import pytest

from benchmarks.fabric import Counterfactual, Links, comm_time, hostable, injection_bandwidth, unusable
from policies.placement import TorusPlacement
from propius.fabric import Allocation, FabricState
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.request import Parallelism
from propius.fabric.torus import RackGrid


def test_a_fragmented_slice_is_hostable_only_within_the_fibre_counts() -> None:
    # A 4x4x2 rack is 8 servers (2x2x2). Hold one server of every x,y column: no aligned 2x2x2 block is
    # free, but four whole servers are. A 2x2x2 slice over two of them needs a z-ring of two servers: 8
    # fibres between them. With 8 fibres per edge it fits; with 4 it does not, whatever the free count.
    for fibres, expected in ((8, True), (4, False)):
        state = FabricState(torus_racks(1, 4, 4, 2, fibres=fibres))
        grid = RackGrid.of(state, "r0")
        for job, host in (("a", "r0-h0"), ("b", "r0-h6"), ("c", "r0-h3"), ("d", "r0-h5")):
            state.allocate(job, Allocation(tuple(grid.host_accelerators(host))))
        free = set(state.free())
        assert len(free) == 16
        # Every free server can start such a placement, so all 16 free chips are usable, or none is.
        assert len(hostable("ours", state, grid, (2, 2, 2), free)) == (16 if expected else 0)
        assert hostable("contiguous only", state, grid, (2, 2, 2), free) == set()
        assert hostable("random scatter", state, grid, (2, 2, 2), free) == free


def test_a_cross_rail_member_gets_half_the_rail_bandwidth() -> None:
    state = FabricState(rail_cluster(2, 2))  # 400 Gb/s rails, 2 µs; 900 Gb/s scale-up, 0.5 µs
    links = Links.of(state)
    dp2 = Parallelism(dp=2)
    same = comm_time(state, links, ("r0-h0-a0", "r0-h1-a0"), dp2, {"dp": 1e9})
    cross = comm_time(state, links, ("r0-h0-a0", "r0-h1-a1"), dp2, {"dp": 1e9})
    inside = comm_time(state, links, ("r0-h0-a0", "r0-h0-a1"), dp2, {"dp": 1e9})
    # ring AllReduce of 2: 2 steps, each member moves 2(n-1)/n = 1 GB = 8 Gb.
    assert same == pytest.approx(2 * 2e-6 + 8 / 400)
    assert cross == pytest.approx(2 * 2e-6 + 8 / 200)
    assert inside == pytest.approx(2 * 0.5e-6 + 8 / 900)


def test_small_slices_get_three_times_the_raw_injection_bandwidth_with_steering() -> None:
    links = injection_bandwidth()
    assert links["2x2x1"] == {"fixed_links": 2.0, "steered_links": 6.0}
    assert links["4x4x4"] == {"fixed_links": 6.0, "steered_links": 6.0}


def test_a_32_chip_request_stranded_by_shape_is_served_on_the_programmable_twin() -> None:
    # One 4x4x4 rack, every other server held (z = 1 and 3): 32 free chips, no aligned 2x4x4 block.
    fixed, twin = FabricState(torus_racks(1, programmable=False)), FabricState(torus_racks(1))
    for state in (fixed, twin):
        grid = RackGrid.of(state, "r0")
        for k, host in enumerate(grid.host_at.values()):
            if k % 2:
                state.allocate(f"j{k}", Allocation(tuple(grid.host_accelerators(host))))
    free = set(fixed.free())
    assert len(free) == 32
    probe = Counterfactual()
    probe.ask(fixed, twin, TorusPlacement(fragmented=False), TorusPlacement(time_budget_s=0.2))
    assert (probe.probes, probe.room, probe.contiguous, probe.served) == (1, 1, 0, 1)
    # The rack's 32 free chips are stranded for contiguous-only (enough by count, wrong shape), not for ours;
    # for a whole-rack request they are unusable for both, but by count, so not stranded.
    assert unusable("contiguous only", fixed, [RackGrid.of(fixed, "r0")], (2, 4, 4), free) == (32, 32)
    assert unusable("ours", twin, [RackGrid.of(twin, "r0")], (2, 4, 4), free) == (0, 0)
    assert unusable("ours", twin, [RackGrid.of(twin, "r0")], (4, 4, 4), free) == (32, 0)


def test_fragmentation_counts_the_free_chips_outside_every_placement_not_whole_racks() -> None:
    # One 4x4x4 rack of 2x2x1 servers (server grid 2x2x4), all free but h1 (0,0,1), h2 (0,0,2) and h5
    # (0,1,1): 52 free chips. The x = 1 half is a free 2x4x4, and the 4x2x2 at chip (0,2,2) holds h6, h7,
    # h14, h15; h0, h3 and h4 lie in no free aligned 16-chip block, so contiguous-only can use 40 chips.
    fixed, twin = FabricState(torus_racks(1, programmable=False)), FabricState(torus_racks(1))
    for state in (fixed, twin):
        grid = RackGrid.of(state, "r0")
        hosts = list(grid.host_at.values())
        for k in (1, 2, 5):
            state.allocate(f"j{k}", Allocation(tuple(grid.host_accelerators(hosts[k]))))
    grid, free = RackGrid.of(fixed, "r0"), set(fixed.free())
    assert len(free) == 52
    blocks = {a for b in TorusPlacement(fragmented=False).contiguous_blocks(fixed, grid, (2, 2, 4), free)
              for a in b.accelerators}
    assert len(blocks) == 40
    assert hostable("contiguous only", fixed, grid, (2, 2, 4), free) == blocks
    assert unusable("contiguous only", fixed, [grid], (2, 2, 4), free) == (52 - len(blocks), 52 - len(blocks))
    # On programmable racks any four free servers can hold a 2x2x4: every free chip is usable.
    assert unusable("ours", twin, [RackGrid.of(twin, "r0")], (2, 2, 4), free) == (0, 0)
