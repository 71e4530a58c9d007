"""Spares lent to preemptible work (issue 21, item 3): a preemptible request may borrow a rack's spares when
free accelerators do not suffice; a failure reclaims a lent spare by preempting its holder. Hand-checked
cases, then a hypothesis state machine: whatever the sequence of placements (preemptible or not, every
plug-in), releases, failures and repairs, no non-preemptible job holds a lent spare, a rack's reserve
(spares, lent ones included) only shrinks by a failed reserve chip or a spare swapped into a
non-preemptible job, and a snapshot restores the very same state.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from policies.placement import FirstFitPlacement, RailAlignedPlacement, TorusPlacement
from policies.placement.base import Placement
from propius.fabric import AcceleratorState, Allocation, CloudRequest, Fabric, FabricError, FabricState
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.recovery import RecoveryParams, recover
from propius.fabric.snapshot import restore, snapshot

SPARES = ("r0-h7-a0", "r0-h7-a1", "r0-h7-a2", "r0-h7-a3")


def _rack_with_spares() -> FabricState:
    """One 4x4x2 programmable rack (32 chips), host h7's four chips spares."""
    state = FabricState(torus_racks(1, 4, 4, 2))
    for acc in SPARES:
        state.set_state(acc, AcceleratorState.SPARE)
    return state


def test_a_preemptible_request_borrows_spares_only_when_free_accelerators_do_not_suffice() -> None:
    state = _rack_with_spares()
    placement = FirstFitPlacement()
    big = placement.allocation_for(CloudRequest(count=28), state)
    assert isinstance(big, Allocation) and not big.preemptible
    state.allocate("big", big)
    assert placement.allocation_for(CloudRequest(count=2), state).reason == "2 accelerators requested, 0 free"  # type: ignore[union-attr]
    small = placement.allocation_for(CloudRequest(count=2, preemptible=True), state)
    assert isinstance(small, Allocation) and small.preemptible and set(small.accelerators) <= set(SPARES)
    state.allocate("small", small)
    assert state.allocations["small"].lent == small.accelerators
    assert state.reserve("r0") == 4 and set(state.lent()) == set(small.accelerators)
    state.check_invariants()
    state.release("small")
    assert [state.state(a) for a in SPARES] == [AcceleratorState.SPARE] * 4 and state.lent() == {}
    # With free room, a preemptible request takes free accelerators, not spares.
    state.release("big")
    roomy = placement.allocation_for(CloudRequest(count=4, preemptible=True), state)
    assert isinstance(roomy, Allocation) and not set(roomy.accelerators) & set(SPARES)


def test_a_non_preemptible_allocation_is_refused_a_spare_without_trace() -> None:
    state = _rack_with_spares()
    with pytest.raises(FabricError, match="only a preemptible allocation may borrow it"):
        state.allocate("x", Allocation(("r0-h0-a0", SPARES[0])))
    assert state.allocations == {} and state.state("r0-h0-a0") == AcceleratorState.FREE
    assert state.state(SPARES[0]) == AcceleratorState.SPARE


def _full_rack_with_lent_spares() -> tuple[FabricState, Allocation]:
    """28 chips to a non-preemptible job, two spares lent to a preemptible one, two spares free."""
    state = _rack_with_spares()
    placement = FirstFitPlacement()
    held = placement.allocation_for(CloudRequest(count=28), state)
    assert isinstance(held, Allocation)
    state.allocate("held", held)
    borrower = placement.allocation_for(CloudRequest(count=2, preemptible=True), state)
    assert isinstance(borrower, Allocation)
    state.allocate("borrower", borrower)
    return state, held


def test_recovery_prefers_a_free_spare_then_reclaims_a_lent_one() -> None:
    state, held = _full_rack_with_lent_spares()
    lent = set(state.lent())
    first = recover(state, held.accelerators[0], RecoveryParams())
    assert first.kind == "in-rack swap" and first.spare not in lent and first.preempted is None
    second = recover(state, held.accelerators[1], RecoveryParams())
    assert second.kind == "in-rack swap" and second.spare not in lent and second.preempted is None
    assert state.reserve("r0") == 2  # two spares consumed by the non-preemptible job, two still lent
    third = recover(state, held.accelerators[2], RecoveryParams())
    assert third.kind == "in-rack swap" and third.spare in lent and third.preempted == "borrower"
    assert "borrower" not in state.allocations
    other = (lent - {third.spare}).pop()
    assert state.state(other) == AcceleratorState.SPARE and state.reserve("r0") == 1
    assert state.allocations["held"].accelerators[2] == third.spare and state.allocations["held"].lent == ()
    # The recovery time is the swap's, unchanged by the preemption.
    params = RecoveryParams()
    assert third.time_s == pytest.approx(params.detect_s + params.program_s + params.restart_s + params.comm_init_s
                                         + params.first_step_s + params.checkpoint_interval_s / 2)
    state.check_invariants()


def test_a_failed_preemptible_job_takes_only_a_free_spare_and_keeps_it_lent() -> None:
    state = _rack_with_spares()
    placement = FirstFitPlacement()
    state.allocate("held", placement.allocation_for(CloudRequest(count=28), state))  # type: ignore[arg-type]
    state.allocate("a", placement.allocation_for(CloudRequest(count=2, preemptible=True), state))  # type: ignore[arg-type]
    state.allocate("b", placement.allocation_for(CloudRequest(count=2, preemptible=True), state))  # type: ignore[arg-type]
    failed = state.allocations["a"].accelerators[0]
    recovery = recover(state, failed, RecoveryParams())
    assert recovery.kind == "queue" and recovery.preempted is None  # b keeps its spares
    assert "b" in state.allocations and state.reserve("r0") == 3  # only the failed spare left the reserve


def test_a_snapshot_keeps_lent_spares_and_restores_the_same_state() -> None:
    state, _ = _full_rack_with_lent_spares()
    snap = snapshot(state)
    assert snap.allocations["borrower"].preemptible and len(snap.allocations["borrower"].lent) == 2
    again = restore(state.fabric, snap)
    assert again.allocations == state.allocations and again.lent() == state.lent()
    assert {a: again.state(a) for a in again.accelerators} == {a: state.state(a) for a in state.accelerators}
    again.release("borrower")
    assert again.reserve("r0") == 4 and again.free() == []


# ---------------------------------------------------------------- random sequences

RAILS = rail_cluster(4, 4, rail_kind="ocs", hosts_per_rack=2)
TORUS = torus_racks(2, 4, 2, 2, fibres=8)
PLACEMENTS: dict[str, Placement] = {"first-fit": FirstFitPlacement(), "rail": RailAlignedPlacement(),
                                    "torus": TorusPlacement(time_budget_s=0.05)}


class LendingMachine(RuleBasedStateMachine):
    """Placements (preemptible or not) by every plug-in through ``allocation_for``, releases, spares set
    aside, failures with recovery, repairs; the reserve per rack is accounted change by change."""

    jobs = Bundle("jobs")
    fabric: Fabric = RAILS

    def __init__(self) -> None:
        super().__init__()
        self.state = FabricState(self.fabric)
        self.counter = 0
        self.expected = {rack: 0 for rack in self.state.racks}

    @initialize(per_rack=st.integers(0, 4))
    def set_aside_spares(self, per_rack: int) -> None:
        """The first chips of each rack's last host are spares."""
        last = {self.state.hosts[a.host].rack: a.host for a in self.state.fabric.accelerators}
        for rack, host in last.items():
            for acc in [a.id for a in self.state.fabric.accelerators if a.host == host][:per_rack]:
                self.state.set_state(acc, AcceleratorState.SPARE)
                self.expected[rack] += 1

    @rule(target=jobs, count=st.sampled_from([1, 2, 4, 8]), preemptible=st.booleans(),
          which=st.sampled_from(sorted(PLACEMENTS)))
    def place(self, count: int, preemptible: bool, which: str) -> str:
        self.counter += 1
        job = f"j{self.counter}"
        if which == "torus" and not any(r.torus for r in self.state.fabric.racks):
            return job
        placement, request = PLACEMENTS[which], CloudRequest(count=count, preemptible=preemptible)
        found = placement.allocation_for(request, self.state)
        if isinstance(found, Allocation):
            spares = [a for a in found.accelerators if self.state.state(a) == AcceleratorState.SPARE]
            assert found.preemptible == preemptible and (preemptible or not spares)
            if spares:  # borrowed only because the free accelerators alone did not do
                assert not isinstance(placement.place(request, self.state), Allocation)
            self.state.allocate(job, found)
            assert set(self.state.allocations[job].lent) == set(spares)
        return job

    @rule(target=jobs)
    def fill(self) -> str:
        """A non-preemptible job takes every free accelerator (what leaves preemptible work only spares)."""
        self.counter += 1
        job = f"j{self.counter}"
        free = self.state.free()
        if free:
            found = FirstFitPlacement().allocation_for(CloudRequest(count=len(free)), self.state)
            assert isinstance(found, Allocation) and not found.preemptible
            self.state.allocate(job, found)
        return job

    @rule(job=consumes(jobs))
    def release(self, job: str) -> None:
        if job in self.state.allocations:
            self.state.release(job)

    @rule(pick=st.integers(0, 10_000))
    def reserve_spare(self, pick: int) -> None:
        free = self.state.free()
        if free:
            acc = free[pick % len(free)]
            self.state.set_state(acc, AcceleratorState.SPARE)
            self.expected[self.state.rack_of(acc)] += 1

    @rule(pick=st.integers(0, 10_000), held=st.booleans())
    def fail_and_recover(self, pick: int, held: bool) -> None:
        """Fail any healthy chip, or (``held``) one a non-preemptible job holds: the case that reclaims."""
        healthy = [a for a in self.state.accelerators if self.state.state(a) != AcceleratorState.FAILED
                   and (not held or (job := self.state.job_of(a)) is not None
                        and not self.state.allocations[job].preemptible)]
        if not healthy:
            return
        acc = healthy[pick % len(healthy)]
        was_reserve = self.state.state(acc) == AcceleratorState.SPARE or acc in self.state.lent()
        job = self.state.job_of(acc)
        preemptible = job is not None and self.state.allocations[job].preemptible
        holders = {a: (j, self.state.allocations[j].preemptible) for a, j in self.state.lent().items()}
        recovery = recover(self.state, acc, RecoveryParams())
        self.expected[self.state.rack_of(acc)] -= was_reserve
        if recovery.kind in ("in-rack swap", "electrical swap") and not preemptible:
            assert recovery.spare is not None
            self.expected[self.state.rack_of(recovery.spare)] -= 1
        if recovery.preempted is not None:
            assert not preemptible and holders[recovery.spare] == (recovery.preempted, True)  # type: ignore[index]
            assert recovery.preempted not in self.state.allocations

    @rule(pick=st.integers(0, 10_000), spare=st.booleans())
    def repair(self, pick: int, spare: bool) -> None:
        failed = [a for a in self.state.in_state(AcceleratorState.FAILED) if self.state.job_of(a) is None]
        if failed:
            acc = failed[pick % len(failed)]
            self.state.set_state(acc, AcceleratorState.SPARE if spare else AcceleratorState.FREE)
            self.expected[self.state.rack_of(acc)] += spare

    @invariant()
    def no_spare_lost_and_none_under_a_non_preemptible_job(self) -> None:
        self.state.check_invariants()
        assert {rack: self.state.reserve(rack) for rack in self.state.racks} == self.expected
        for acc, job in self.state.lent().items():
            assert self.state.allocations[job].preemptible, f"{job} holds lent spare {acc}"
        again = restore(self.state.fabric, snapshot(self.state))
        assert again.allocations == self.state.allocations
        assert all(again.state(a) == self.state.state(a) for a in self.state.accelerators)


class TorusLendingMachine(LendingMachine):
    fabric = TORUS


_SETTINGS = settings(max_examples=40, stateful_step_count=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])
LendingMachine.TestCase.settings = _SETTINGS
TorusLendingMachine.TestCase.settings = _SETTINGS
TestRailLending = LendingMachine.TestCase
TestTorusLending = TorusLendingMachine.TestCase
