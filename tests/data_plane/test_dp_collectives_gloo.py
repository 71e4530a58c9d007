"""StragglAR over gloo in real local processes gives all_reduce's result (correctness only, not speed)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from data_plane.collectives.gloo import launch  # noqa: E402


def test_stragglar_on_gloo_equals_all_reduce() -> None:
    report = launch(4, 999, repeats=1, seed=3, delay_factor=(1.0, 1.0), timeout_s=120)
    assert report["float64_bit_identical"]
    assert report["float32_within_bound"]
    assert report["completion_rounds"] == 4
    assert (report["n"], report["numel"], len(report["runs"])) == (4, 999, 1)
    run = report["runs"][0]
    assert run["delay_s"] == report["reduce_scatter_s"]  # a delay factor of exactly 1
    assert run["stragglar"] > 0 and run["allreduce"] > 0  # timings: measured, so only their sign is known
