"""The metrics equal values worked out by hand on the hand-made data point (its layout: conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from propius.trace.cli import app
from propius.trace.datapoint import load_data_point
from propius.trace.intervals import clip, covered, intersection, union
from propius.trace.metrics import TOOLKIT_MAX_RANK_FILES, compute_metrics, measured_steps, toolkit_ranks


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

    # Communication fraction (CCL-Bench's: per rank and step, summed comm durations / summed kernel durations of
    # the kernels overlapping the step; mean over the rank's steps, then over ranks):
    #   rank 0: comm 1000, compute 500 every step                              -> 2/3
    #   rank 1: fetch 1000 + upload 1000 = 2000 of 2000 + training 2000 = 4000  -> 1/2 (the overlap counts twice)
    #   rank 2: steps 1, 2: 1000 of 5000 = 1/5; step 3: 1000 of 3000 = 1/3      -> (1/5 + 1/5 + 1/3) / 3 = 11/45
    #   rank 3: 1500 of 2500                                                    -> 3/5
    assert result.communication_fraction == pytest.approx((2 / 3 + 1 / 2 + 11 / 45 + 3 / 5) / 4)

    # Overlap (comm also covered by compute / comm): only rank 1's upload overlaps its training,
    # [3500,4000) = 500 of 2000 per step -> 1/4; ranks 0, 2, 3 -> 0. Mean: 1/16.
    assert result.compute_comm_overlap == pytest.approx(1 / 16)

    # Worker finish lag over the slots (rank 0 is the server): last end of ranks 1, 2, 3 per step
    #   step 1: 4500, 6000, 3500 -> max 6000 - median 4500 = 1500
    #   step 2: same            -> 1500
    #   step 3: 4500, 4000, 3500 -> max 4500 - median 4000 = 500
    #   mean 3500 / 3 µs
    assert result.worker_finish_lag_s == pytest.approx(3500 / 3 * 1e-6)

    # Worker compute imbalance over the slots: busy compute of ranks 1, 2, 3 per step
    #   steps 1, 2: 2000, 4000, 1000 -> 4000 / (7000/3) - 1 = 5/7
    #   step 3:     2000, 2000, 1000 -> 2000 / (5000/3) - 1 = 1/5
    assert result.worker_compute_imbalance == pytest.approx((5 / 7 + 5 / 7 + 1 / 5) / 3)


def test_without_a_server_rank_every_rank_is_a_worker(handmade) -> None:
    card = handmade.card()
    del card["collection_notes"]["server_rank"]
    handmade.save_card(card)
    # Worker finish lag with rank 0 too: ends 4500 (rank 0), 4500, 6000, 3500 in steps 1 and 2 -> 6000 - 4500 = 1500;
    # step 3: 4500, 4500, 4000, 3500 -> 4500 - 4250 = 250. Mean 3250 / 3 µs.
    assert compute_metrics(load_data_point(handmade.folder)).worker_finish_lag_s == pytest.approx(3250 / 3 * 1e-6)


def test_cli_metrics_json(handmade) -> None:
    result = CliRunner().invoke(app, ["metrics", str(handmade.folder), "--json"])
    assert result.exit_code == 0, result.output
    values = json.loads(result.output)
    assert values["data_point"] == "mlp-fl-cpu-t0"
    assert values["avg_step_time_s"] == pytest.approx(0.007)
    table = CliRunner().invoke(app, ["metrics", str(handmade.folder)])
    assert values["communication_fraction"] == pytest.approx((2 / 3 + 1 / 2 + 11 / 45 + 3 / 5) / 4)
    assert table.exit_code == 0 and "communication_fraction (CCL-Bench)" in table.output
    assert "50.28 %" in table.output  # 181/360


def _kernel(rank: int, name: str, start: int, end: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": rank, "tid": 1, "ts": start, "dur": end - start,
            "args": {}}


def _steps(rank: int) -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": rank, "tid": 0,
             "ts": 100 * n, "dur": 100, "args": {}} for n in range(4)]


def test_communication_fraction_is_ccl_bench_s(tmp_path: Path) -> None:
    """CCL-Bench's communication_fraction (tools/communication_fraction, json traces), derived by hand.

    Three ranks, steps #0..#3 at [100n, 100n + 100) µs; each rank drops its first and last step, so #1 and #2
    are measured. Per rank and step, the tool adds the *whole* durations of the kernels that overlap the step
    (not clipped to it, and overlapping kernels each count in full), takes comm / all, averages the rank's
    steps that have kernels, then averages the ranks that have kernels.

        rank 0  gemm [100, 160)   nccl_allreduce [150, 230)   sendrecv_grad [170, 190)   gemm [240, 300)
          #1 [100, 200): gemm 60 + allreduce 80 + sendrecv 20 = 160, comm 100  -> 5/8
          #2 [200, 300): allreduce 80 (starts in #1, counted whole again) + gemm 60 = 140, comm 80 -> 4/7
          rank: (5/8 + 4/7) / 2 = 67/112
        rank 1  alltoall_dispatch [100, 150)   broadcast_params [150, 200)
          #1: 50 + 50 = 100; 'alltoall' is not one of the tool's names, so only the broadcast is comm -> 1/2
          #2: no kernel, so no ratio (not a zero)
          rank: 1/2
        rank 2  steps only: no kernel, so the rank is left out

    communication_fraction = (67/112 + 1/2) / 2 = 123/224 (the toolkit prints 54.91 %).
    A union of clipped spans summed over steps (our earlier definition) gives rank 0 80/190 and rank 1 1.
    """
    folder = tmp_path / "sample"
    folder.mkdir()
    kernels = {0: [_kernel(0, "gemm", 100, 160), _kernel(0, "nccl_allreduce", 150, 230),
                   _kernel(0, "sendrecv_grad", 170, 190), _kernel(0, "gemm", 240, 300)],
               1: [_kernel(1, "alltoall_dispatch", 100, 150), _kernel(1, "broadcast_params", 150, 200)],
               2: []}
    for rank, work in kernels.items():
        (folder / f"rank{rank}_trace.json").write_text(json.dumps({"traceEvents": _steps(rank) + work}))
    result = compute_metrics(load_data_point(folder))
    assert result.communication_fraction == pytest.approx(123 / 224)
    assert result.avg_step_time_s == pytest.approx(100e-6)


def test_the_toolkit_reads_its_seeded_sample_of_sixteen_rank_files(tmp_path: Path) -> None:
    folder = tmp_path / "wide"
    folder.mkdir()
    for rank in range(20):
        (folder / f"rank{rank}_trace.json").write_text(json.dumps({"traceEvents": _steps(rank)}))
    ranks = [trace.rank for trace in toolkit_ranks(load_data_point(folder))]
    # random.Random(42).sample of 16 over the 20 names sorted as strings (rank0, rank10, ..., rank19, rank1, rank2,
    # ...), sorted again: ranks 4, 9, 13 and 14 are left out
    assert len(ranks) == TOOLKIT_MAX_RANK_FILES
    assert ranks == [0, 10, 11, 12, 15, 16, 17, 18, 19, 1, 2, 3, 5, 6, 7, 8]
