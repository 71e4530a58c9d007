"""The OCS benchmark's measures (``benchmarks/ocs.py``) at two switching times: the must-shows hold."""

from __future__ import annotations

from benchmarks.ocs import DEGREES, overheads, power_table
from propius.fabric.llm_phases import derive_phases, llama3_8b


def test_speculation_keeps_100ms_switching_under_6_percent_and_beats_on_demand() -> None:
    phases = derive_phases(DEGREES, llama3_8b(micro_batches=4))
    for r_ms in (0, 100, 1000):
        row = overheads(phases, r_ms, seed=1, jitter=0.1)
        assert row["on-demand"]["overhead"] >= row["speculative"]["overhead"]
        assert row["on-demand"]["violations"] == row["speculative"]["violations"] == 0
        if r_ms <= 100:
            assert row["speculative"]["overhead"] < 0.06
    assert row["on-demand"]["overhead"] > 0.2  # at 1 s the switching shows


def test_power_table_covers_every_size_and_rate() -> None:
    rows = power_table()
    assert {(r["gpus"], r["gbps"]) for r in rows} == {(n, g) for n in (128, 512, 2048) for g in (100, 200, 400, 800,
                                                                                               1600)}
    assert all(r["power_ratio"] > 10 for r in rows)
