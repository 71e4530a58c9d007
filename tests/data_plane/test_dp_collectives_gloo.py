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
    assert report["runs"][0]["stragglar"] > 0 and report["runs"][0]["allreduce"] > 0
