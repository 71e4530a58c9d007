"""The metrics equal values worked out by hand on the hand-made data point (its layout: conftest.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from propius.trace.cli import app
from propius.trace.datapoint import load_data_point
from propius.trace.intervals import clip, covered, intersection, union
from propius.trace.metrics import compute_metrics, measured_steps


def test_intervals() -> None:
    assert union([(5, 7), (0, 2), (1, 3), (7, 8), (9, 9)]) == [(0, 3), (5, 8)]
    assert covered([(0, 2), (1, 3)]) == 3
    assert intersection([(0, 4), (6, 8)], [(3, 7)]) == 2  # [3, 4) and [6, 7)
    assert clip((5, 15), (0, 10)) == (5, 10) and clip((10, 12), (0, 10)) is None
    assert clip((4, 4), (0, 10)) == (4, 4) and clip((10, 10), (0, 10)) is None  # an instant inside, one at the end


def test_metrics_match_the_hand_computed_values(handmade) -> None:
    point = load_data_point(handmade.folder)
    assert measured_steps(point) == [1, 2, 3]  # steps 0 and 4 are dropped
    result = compute_metrics(point)
    assert (result.ranks, result.steps, result.steps_measured) == (4, 5, 3)

    # Average step time: steps 1..3 last 8000, 6000, 7000 µs on every rank -> 7000 µs.
    assert result.avg_step_time_s == pytest.approx(0.007)

    # Communication fraction, per rank over steps 1..3 (covered comm / covered work):
    #   rank 0: comm 1000, work [0,1000)+[4000,4500) = 1500               -> 3000 / 4500  = 2/3
    #   rank 1: comm [1000,2000)+[3500,4500) = 2000, work [1000,4500) = 3500 -> 6000 / 10500 = 4/7
    #   rank 2: comm 500+500 = 1000 each step; work 5000, 5000, 3000       -> 3000 / 13000 = 3/13
    #   rank 3: comm 1000+500 = 1500, work [1000,3500) = 2500               -> 4500 / 7500  = 3/5
    assert result.communication_fraction == pytest.approx((2 / 3 + 4 / 7 + 3 / 13 + 3 / 5) / 4)

    # Overlap (comm also covered by compute / comm): only rank 1's upload overlaps its training,
    # [3500,4000) = 500 of 2000 per step -> 1/4; ranks 0, 2, 3 -> 0. Mean: 1/16.
    assert result.compute_comm_overlap == pytest.approx(1 / 16)

    # Straggler delay over the slots (rank 0 is the server): last end of ranks 1, 2, 3 per step
    #   step 1: 4500, 6000, 3500 -> max 6000 - median 4500 = 1500
    #   step 2: same            -> 1500
    #   step 3: 4500, 4000, 3500 -> max 4500 - median 4000 = 500
    #   mean 3500 / 3 µs
    assert result.straggler_delay_s == pytest.approx(3500 / 3 * 1e-6)

    # Load imbalance over the slots: busy compute of ranks 1, 2, 3 per step
    #   steps 1, 2: 2000, 4000, 1000 -> 4000 / (7000/3) - 1 = 5/7
    #   step 3:     2000, 2000, 1000 -> 2000 / (5000/3) - 1 = 1/5
    assert result.load_imbalance == pytest.approx((5 / 7 + 5 / 7 + 1 / 5) / 3)


def test_without_a_server_rank_every_rank_is_a_worker(handmade) -> None:
    card = handmade.card()
    del card["collection_notes"]["server_rank"]
    handmade.save_card(card)
    # Straggler delay with rank 0 too: ends 4500 (rank 0), 4500, 6000, 3500 in steps 1 and 2 -> 6000 - 4500 = 1500;
    # step 3: 4500, 4500, 4000, 3500 -> 4500 - 4250 = 250. Mean 3250 / 3 µs.
    assert compute_metrics(load_data_point(handmade.folder)).straggler_delay_s == pytest.approx(3250 / 3 * 1e-6)


def test_cli_metrics_json(handmade) -> None:
    result = CliRunner().invoke(app, ["metrics", str(handmade.folder), "--json"])
    assert result.exit_code == 0, result.output
    values = json.loads(result.output)
    assert values["data_point"] == "handmade-fl"
    assert values["avg_step_time_s"] == pytest.approx(0.007)
    table = CliRunner().invoke(app, ["metrics", str(handmade.folder)])
    assert table.exit_code == 0 and "communication fraction" in table.output
