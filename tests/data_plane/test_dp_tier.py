"""The sharded aggregation tier on real processes gives the data plane's single-process aggregate, and binds the
persistent straggler to StragglAR's last rank; requests beyond its bounds are refused before any process starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from data_plane.aggregator import RoundAggregator  # noqa: E402
from data_plane.collectives.tier import MAX_SHARDS, TierError, TierRun, run_tier  # noqa: E402
from data_plane.tensors import PayloadError, encode  # noqa: E402

SHARDS, PER_SHARD = 3, 2
DELAY_S = 0.2  # shard 0's cohort is late by this every step: far above the machine's jitter


def _updates(seed: int = 1) -> list[list[tuple[dict[str, np.ndarray], float]]]:
    """Integer-valued float64 and an int64 counter (exact arithmetic, with power-of-two weights) beside a
    Gaussian float32 tensor (rounding in every order)."""
    rng = np.random.default_rng(seed)
    return [[({"exact": rng.integers(-2**20, 2**20, (40, 30)).astype(np.float64),
               "steps": np.array(rng.integers(0, 1000), np.int64),
               "gauss": rng.standard_normal(257).astype(np.float32)}, float(2 ** rng.integers(0, 12)))
             for _ in range(PER_SHARD)] for _ in range(SHARDS)]


def _cohorts(updates) -> list[list[tuple[bytes, float]]]:
    return [[(encode(tensors), weight) for tensors, weight in cohort] for cohort in updates]


@pytest.fixture(scope="module")
def tier_run(tmp_path_factory) -> TierRun:
    return run_tier(_cohorts(_updates()), tmp_path_factory.mktemp("tier") / "run", steps=4, straggler=0,
                    delay_s=DELAY_S, timeout_s=240)


@pytest.mark.timeout(300)
async def test_the_tier_equals_the_single_process_aggregate(tier_run, raw_redis, namespace) -> None:
    updates = _updates()
    single = RoundAggregator(raw_redis, namespace, 0, 0)
    for shard, cohort in enumerate(updates):
        for index, (tensors, weight) in enumerate(cohort):
            assert (await single.add(f"s{shard}-c{index}", encode(tensors), weight)).accepted
    reference = await single.finalize()
    sharded = tier_run.aggregate
    assert (sharded.results, sharded.total_weight) == (reference.results, reference.total_weight)
    for name in ("exact", "steps"):  # every operation exact: bit for bit
        assert sharded.tensors[name].dtype == reference.tensors[name].dtype
        assert np.array_equal(sharded.tensors[name], reference.tensors[name])
    # float32: each float64 sum within (K + n)·eps64·Σw|x|/Σw of the exact one, then one float32 rounding.
    flat = [(tensors["gauss"].astype(np.float64), weight) for cohort in updates for tensors, weight in cohort]
    magnitude = sum(weight * np.abs(x) for x, weight in flat) / sum(weight for _, weight in flat)
    bound = (2 * (len(flat) + SHARDS) * np.finfo(np.float64).eps * magnitude
             + np.finfo(np.float32).eps * np.abs(reference.tensors["gauss"].astype(np.float64)))
    difference = np.abs(sharded.tensors["gauss"].astype(np.float64) - reference.tensors["gauss"])
    assert sharded.tensors["gauss"].dtype == np.float32 and (difference <= bound).all()


@pytest.mark.timeout(300)
def test_the_persistent_straggler_is_bound_last_and_stragglar_runs(tier_run) -> None:
    first, *later = tier_run.steps
    assert all(step.last_arrival == 0 and step.lag_s["0"] >= DELAY_S / 2 for step in tier_run.steps)
    assert (first.algorithm, first.order) == ("allreduce", [0, 1, 2])  # no arrivals seen yet: no straggler
    for step in later:  # tracker: shard 0 last every step -> bound to the last logical rank, StragglAR predicted
        assert step.order == [1, 2, 0] and step.selected == "stragglar" == step.algorithm
        assert step.predicted_s["stragglar"] < min(step.predicted_s["ring"], step.predicted_s["rhd"])
    assert [path.is_file() for path in tier_run.traces.values()] == [True] * SHARDS


def _payload(**arrays) -> bytes:
    return encode({"w": np.zeros(4), **arrays})


@pytest.mark.parametrize(("cohorts", "options", "field"), [
    ([[(_payload(), 1.0)]], {}, "shards"),
    ([[(_payload(), 1.0)]] * (MAX_SHARDS + 1), {}, "shards"),
    ([[(_payload(), 1.0)], []], {}, "cohorts[1]"),
    ([[(_payload(), 1.0)], [(_payload(), 0.0)]], {}, "cohorts[1][0]"),
    ([[(_payload(), 1.0)], [(_payload(), float("nan"))]], {}, "cohorts[1][0]"),
    ([[(_payload(), 1.0)], [(encode({"w": np.zeros(5)}), 1.0)]], {}, "cohorts[1][0]"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"steps": 0}, "steps"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"modes": ("fastest",)}, "modes"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"straggler": 2}, "straggler"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"delay_s": 1.0}, "delay_s"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"straggler": 0, "delay_s": 3600.0}, "delay_s"),
    ([[(_payload(), 1.0)], [(_payload(), 1.0)]], {"backend": "mpi"}, "backend"),
])
def test_refused_before_any_process_starts(tmp_path: Path, cohorts, options, field: str) -> None:
    with pytest.raises(TierError) as refused:
        run_tier(cohorts, tmp_path / "run", **options)
    assert refused.value.field == field
    assert not (tmp_path / "run").exists()


def test_a_malformed_or_non_finite_update_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PayloadError, match=r"cohorts\[0\]\[0\]"):
        run_tier([[(b"not safetensors", 1.0)], [(_payload(), 1.0)]], tmp_path / "run")
    with pytest.raises(PayloadError, match=r"cohorts\[1\]\[0\].*NaN"):
        run_tier([[(_payload(), 1.0)], [(encode({"w": np.full(4, np.inf)}), 1.0)]], tmp_path / "run")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    with pytest.raises(TierError, match="not empty"):
        run_tier([[(_payload(), 1.0)], [(_payload(), 1.0)]], tmp_path / "busy")
