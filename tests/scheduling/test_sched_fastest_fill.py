"""``fastest_fill_at``: the round's open result slots filled by the earliest predicted deliveries."""

from __future__ import annotations

from control_plane.scheduling.fastest_fill import fastest_fill_at

# At t = 100: a working member bound at 90 with a 30 s task delivers at 120; a client busy elsewhere
# until 105 with a 10 s task for this job at 115; one whose other task is overdue (95) at 100 + 10 = 110;
# an idle one with a 50 s task at 150; unknown task times are not counted.
MEMBERS = [(90.0, 30.0), (80.0, None)]
BUSY = [(105.0, 10.0), (95.0, 10.0), (101.0, None)]
IDLE = [50.0, None]


def test_the_slots_th_earliest_delivery() -> None:
    assert fastest_fill_at(100.0, 1, MEMBERS, BUSY, IDLE) == 110.0
    assert fastest_fill_at(100.0, 2, MEMBERS, BUSY, IDLE) == 115.0
    assert fastest_fill_at(100.0, 3, MEMBERS, BUSY, IDLE) == 120.0
    assert fastest_fill_at(100.0, 4, MEMBERS, BUSY, IDLE) == 150.0


def test_none_without_enough_known_clients_or_open_slots() -> None:
    assert fastest_fill_at(100.0, 5, MEMBERS, BUSY, IDLE) is None  # four known clients
    assert fastest_fill_at(100.0, 0, MEMBERS, BUSY, IDLE) is None
    assert fastest_fill_at(100.0, 1, [], [], []) is None
