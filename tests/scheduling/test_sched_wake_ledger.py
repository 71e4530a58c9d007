"""The wake ledger (control_plane.scheduling.wake.WakeLedger): a woken client that leaves the round it was woken
for makes that round wake another, never one it woke before, and the job's later keyed wakes rank it last; what it
keeps is bounded by what is open."""

from __future__ import annotations

import math

from control_plane.scheduling.wake import WakeLedger

R0, R1 = ("job", 0, 0), ("job", 0, 1)  # two attempts of one round
OTHER = ("other", 3, 0)


def free(attempt: tuple[str, int, int]) -> bool:
    """The driver's answer: the attempt still has a free slot."""
    return True


def full(attempt: tuple[str, int, int]) -> bool:
    """The driver's answer: the attempt has no free slot."""
    return False


def test_a_client_that_took_what_it_was_woken_for_settles_quietly() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a", "b"])
    assert ledger.skip(R0) == {"a", "b"}
    assert ledger.settled("a", R0, free) is None
    assert ledger.settled("a", None, free) is None  # settled once: its next check-in owes nothing


def test_a_client_that_left_a_free_slot_hands_it_back_and_is_passed_over() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a", "b"])
    assert ledger.settled("a", None, free) == R0  # checked in again without binding (declined on the device)
    assert ledger.settled("b", OTHER, free) == R0  # bound to another job's round: R0 wakes one more too
    assert ledger.skip(R0) == {"a"}  # the round's next wake passes over the decliner, not b (lost, below)
    assert ledger.settled("c", None, free) is None  # never woken


def test_a_client_that_lost_the_race_may_be_woken_again_a_decliner_may_not() -> None:
    """A woken client that found no free slot, or took another round, leaves the attempt's skip set, so a slot
    the attempt frees later may wake it; one that left a free slot untaken stays passed over."""
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a", "b", "c"])
    ledger.offered("a", ["job"])
    assert ledger.settled("a", None, full) is None  # R0 full when a came back: the race was lost, nobody to wake
    assert ledger.settled("b", OTHER, full) is None  # bound to another job's round: free again once that task ends
    ledger.offered("c", ["job"])
    assert ledger.settled("c", None, free) == R0  # R0 had a free slot and c took nothing
    assert ledger.skip(R0) == {"c"}
    assert ledger.rank("job", lambda client: 1.0)("c") == math.inf  # c declined the job; a and b did not
    assert ledger.rank("job", lambda client: 1.0)("a") == 1.0
    ledger.ended(R0)
    assert not (ledger._woken or ledger._woken_for or ledger._job_of or ledger._latest or ledger._offered)


def test_an_ended_attempt_and_a_job_s_older_attempts_are_forgotten() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    ledger.woke("job", R0, ["a"])
    ledger.woke("other", OTHER, ["b"])
    ledger.woke("job", R1, ["c"])  # the retry: the failed attempt's wakes are over
    assert ledger.skip(R0) == frozenset() and ledger.settled("a", None, free) is None
    assert ledger.skip(R1) == {"c"}
    ledger.ended(R1)
    ledger.ended(OTHER)
    assert ledger.skip(R1) == frozenset() and ledger.settled("c", None, free) is None
    assert ledger.settled("b", None, free) is None
    assert not (ledger._woken or ledger._woken_for or ledger._job_of or ledger._latest)  # nothing kept


def test_a_decliner_ranks_last_in_the_job_s_later_wakes_until_the_job_is_done() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger()
    task_s = {"a": 10.0, "b": 20.0, "c": 30.0}
    ledger.woke("job", R0, ["a", "b"])
    ledger.woke("other", OTHER, ["c"])
    ledger.offered("a", ["other", "job"])  # woken for R0, offered its job (and another)
    ledger.offered("c", ["job"])  # woken for OTHER, not offered that job: no decline to count
    assert ledger.settled("a", None, free) == R0  # took nothing while R0 had a free slot: declined its job
    assert ledger.rank("other", task_s.__getitem__)("a") == 10.0  # another job's wakes are unchanged
    ledger.woke("job", R1, ["b"])  # the retry: R0 is over, a's decline is not
    key = ledger.rank("job", task_s.__getitem__)
    assert (key("a"), key("b"), key("c")) == (math.inf, 20.0, 30.0)
    assert ledger.settled("c", None, free) == OTHER  # never offered OTHER's job (an offer rule kept it away):
    # not a decliner
    assert ledger.rank("other", task_s.__getitem__)("c") == 30.0
    ledger.job_done("job")
    assert ledger.rank("job", task_s.__getitem__)("a") == 10.0
    ledger.offered("b", ["job"])
    ledger.ended(R1)
    assert ledger.settled("b", None, free) is None  # an attempt already ended: nothing to wake, nothing to rank
    assert ledger.rank("job", task_s.__getitem__)("b") == 20.0


def test_a_job_keeps_only_its_latest_decliners() -> None:
    ledger: WakeLedger[str, tuple[str, int, int]] = WakeLedger(declined_cap=2)
    ledger.woke("job", R0, ["a", "b", "c"])
    for client in ("a", "b", "c"):
        ledger.offered(client, ["job"])
        assert ledger.settled(client, None, free) == R0
    key = ledger.rank("job", lambda client: 1.0)
    assert [key(client) for client in ("a", "b", "c")] == [1.0, math.inf, math.inf]
    ledger.job_done("job")
    ledger.ended(R0)
    ledger.woke("job", R1, ["d"])
    ledger.offered("d", ["job"])
    ledger.ended(R1)
    assert not (ledger._woken or ledger._woken_for or ledger._job_of or ledger._latest or ledger._decliners
                or ledger._offered)
