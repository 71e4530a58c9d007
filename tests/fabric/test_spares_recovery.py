"""Spare sizing (seeded Monte Carlo) and swap recovery on small fabrics."""

from __future__ import annotations

import pytest

from policies.placement import RailAlignedPlacement, TorusPlacement
from propius.fabric import AcceleratorState, Allocation, CloudRequest, FabricState
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.recovery import RecoveryParams, recover
from propius.fabric.spares import FailureRates, concurrent_failures, spares_needed


def test_spare_count_is_the_smallest_k_within_epsilon_and_seeded() -> None:
    fabric = torus_racks(1)
    sizing = spares_needed(fabric, "r0", FailureRates(), epsilon=0.01, trials=20_000, seed=0)
    assert sizing == spares_needed(fabric, "r0", FailureRates(), epsilon=0.01, trials=20_000, seed=0)
    assert sizing.tail[sizing.spares] <= 0.01 < sizing.tail[sizing.spares - 1]
    assert sizing.spares == 4  # two 4-chip servers' worth, the Morphlux reference point, at the default rates


def test_shared_risk_groups_fail_together() -> None:
    fabric = torus_racks(1)
    only_boards = FailureRates(chip_per_year=0, board_per_year=1e9, power_per_year=0, tor_per_year=0)
    assert set(concurrent_failures(fabric, "r0", only_boards, trials=50, seed=1)) == {64}  # every board down
    one_tor = FailureRates(chip_per_year=0, board_per_year=0, power_per_year=0, tor_per_year=1e9)
    assert set(concurrent_failures(fabric, "r0", one_tor, trials=50, seed=1)) == {64}
    none = FailureRates(chip_per_year=0, board_per_year=0, power_per_year=0, tor_per_year=0)
    assert spares_needed(fabric, "r0", none, trials=100).spares == 0
    with pytest.raises(ValueError, match="epsilon"):
        spares_needed(fabric, "r0", none, epsilon=0)


def _with_job(programmable: bool) -> tuple[FabricState, Allocation]:
    state = FabricState(torus_racks(1, 4, 4, 2, programmable=programmable))
    for acc in ("r0-h7-a0", "r0-h7-a1"):
        state.set_state(acc, AcceleratorState.SPARE)
    placed = TorusPlacement().place(CloudRequest(count=8), state)
    assert isinstance(placed, Allocation)
    state.allocate("job", placed)
    return state, placed


def test_in_rack_swap_takes_the_logical_position_and_time_is_the_sum() -> None:
    state, placed = _with_job(programmable=True)
    failed = placed.accelerators[5]
    params = RecoveryParams()
    recovery = recover(state, failed, params)
    assert recovery.kind == "in-rack swap" and recovery.throughput == 1.0 and recovery.spare == "r0-h7-a0"
    after = state.allocations["job"]
    assert after.accelerators[5] == "r0-h7-a0" and after.accelerators[:5] == placed.accelerators[:5]
    assert state.state(failed) == AcceleratorState.FAILED and state.job_of(failed) is None
    # h7 (cell 1,1,1) reaches the failed chip's host h1 (0,0,1) over two interposer hops, two fibres each.
    assert after.fibre[-1].path[0] == "r0-h7" and after.fibre[-1].path[-1] == failed.rsplit("-", 1)[0]
    assert after.fibre[-1].width == params.swap_width and len(after.fibre[-1].path) == 3
    expected = (params.detect_s + params.program_s + params.restart_s + params.comm_init_s + params.first_step_s
                + params.checkpoint_interval_s / 2)
    assert recovery.time_s == pytest.approx(expected)
    state.check_invariants()


def test_electrical_rack_swaps_with_a_modelled_loss() -> None:
    state, placed = _with_job(programmable=False)
    recovery = recover(state, placed.accelerators[0], RecoveryParams(electrical_throughput=0.5))
    assert recovery.kind == "electrical swap" and recovery.throughput == 0.5 and "program" not in recovery.components


def test_without_spares_the_job_migrates_or_queues() -> None:
    state = FabricState(torus_racks(2, 4, 4, 2))
    placed = TorusPlacement().place(CloudRequest(count=32), state)
    assert isinstance(placed, Allocation)
    state.allocate("job", placed)

    def elsewhere(s: FabricState, n: int) -> Allocation | None:
        found = TorusPlacement().place(CloudRequest(count=n), s)
        return found if isinstance(found, Allocation) else None

    moved = recover(state, placed.accelerators[0], RecoveryParams(), relocate=elsewhere)
    assert moved.kind == "migrate" and {state.rack_of(a) for a in state.allocations["job"].accelerators} == {"r1"}
    stuck = recover(state, state.allocations["job"].accelerators[0], RecoveryParams(), relocate=elsewhere)
    assert stuck.kind == "queue" and stuck.components["repair"] == RecoveryParams().repair_s
    assert "job" not in state.allocations
    assert recover(state, "r0-h3-a0", RecoveryParams()).kind == "no job"
    state.check_invariants()


def test_ocs_circuits_follow_the_spare_to_its_port() -> None:
    state = FabricState(rail_cluster(3, 2, rail_kind="ocs", hosts_per_rack=3))
    state.set_state("r0-h2-a0", AcceleratorState.SPARE)
    state.allocate("other", Allocation(("r0-h0-a1", "r0-h1-a1")))  # no host has both GPUs free
    placed = RailAlignedPlacement().place(CloudRequest(count=2, parallel={"dp": 2}), state)
    assert isinstance(placed, Allocation) and placed.accelerators == ("r0-h0-a0", "r0-h1-a0")
    state.allocate("job", placed)
    recovery = recover(state, "r0-h1-a0", RecoveryParams())
    assert recovery.kind == "electrical swap"  # a rail cluster's rack is not programmable
    assert state.circuits("rail0") == {0: 2, 2: 0}  # host 1's port 1 replaced by the spare's port 2
    state.check_invariants()


def test_every_recovery_time_is_the_sum_of_its_parameterised_components() -> None:
    # Distinct powers of two make every sum unique: a component counted twice or left out changes it.
    params = RecoveryParams(detect_s=1, program_s=2, restart_s=4, comm_init_s=8, first_step_s=16,
                            checkpoint_interval_s=64, migrate_restore_s=128, repair_s=256)
    lost = params.checkpoint_interval_s / 2
    optical, placed = _with_job(programmable=True)
    assert recover(optical, placed.accelerators[0], params).time_s == 1 + 2 + 4 + 8 + 16 + lost
    electrical, placed = _with_job(programmable=False)
    assert recover(electrical, placed.accelerators[0], params).time_s == 1 + 4 + 8 + 16 + lost

    def elsewhere(s: FabricState, n: int) -> Allocation | None:
        found = TorusPlacement().place(CloudRequest(count=n), s)
        return found if isinstance(found, Allocation) else None

    state = FabricState(torus_racks(2, 4, 4, 2))
    first = TorusPlacement().place(CloudRequest(count=32), state)
    assert isinstance(first, Allocation)
    state.allocate("job", first)
    moved = recover(state, first.accelerators[0], params, relocate=elsewhere)
    assert moved.kind == "migrate" and moved.time_s == 1 + 128 + 8 + 16 + lost
    queued = recover(state, state.allocations["job"].accelerators[0], params, relocate=elsewhere)
    assert queued.kind == "queue" and queued.time_s == 1 + 256 + lost
