"""The wake ledger (control_plane.scheduling.wake.WakeLedger): a woken client that leaves the round it was woken
for makes that round wake another, never one it woke before; what it keeps is bounded by what is open."""

from __future__ import annotations

from control_plane.scheduling.wake import WakeLedger

R0, R1 = ("job", 0, 0), ("job", 0, 1)  # two attempts of one round
OTHER = ("other", 3, 0)


def test_a_client_that_took_what_it_was_woken_for_settles_quietly() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a", "b"])
    assert ledger.skip(R0) == {"a", "b"}
    assert ledger.settled("a", R0) is None
    assert ledger.settled("a", None) is None  # settled once: its next check-in owes nothing


def test_a_client_that_declined_or_went_elsewhere_hands_the_slot_back() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a", "b"])
    assert ledger.settled("a", None) == R0  # checked in again without binding (declined on the device)
    assert ledger.settled("b", OTHER) == R0  # bound to another job's round
    assert ledger.skip(R0) == {"a", "b"}  # the round's next wake passes over both
    assert ledger.settled("c", None) is None  # never woken


def test_an_ended_attempt_and_a_job_s_older_attempts_are_forgotten() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a"])
    ledger.woke("other", OTHER, ["b"])
    ledger.woke("job", R1, ["c"])  # the retry: the failed attempt's wakes are over
    assert ledger.skip(R0) == frozenset() and ledger.settled("a", None) is None
    assert ledger.skip(R1) == {"c"}
    ledger.ended(R1)
    ledger.ended(OTHER)
    assert ledger.skip(R1) == frozenset() and ledger.settled("c", None) is None and ledger.settled("b", None) is None
    assert not (ledger._woken or ledger._woken_for or ledger._job_of or ledger._latest)  # nothing kept
