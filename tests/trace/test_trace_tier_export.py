"""A sharded aggregation run (real processes, real torch.profiler traces) as a CCL-Bench data point: it passes the
format check, and its communication fraction by our metrics is CCL-Bench's, computed here from the raw files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from propius.fabric_bench_cli import app  # noqa: E402
from propius.trace.check import check_data_point  # noqa: E402
from propius.trace.datapoint import load_data_point  # noqa: E402
from propius.trace.metrics import compute_metrics  # noqa: E402
from tests.trace.ccl_bench_tools import ccl_bench_communication_fraction  # noqa: E402

STEPS = 5
_STEP = re.compile(r"ProfilerStep#(\d+)$")
@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bench")
    result = CliRunner().invoke(app, ["--shards", "2", "--size-mib", "0.01", "--steps", str(STEPS), "--delay-ms", "30",
                                      "--out-dir", str(out), "--timeout-s", "240"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "2 shards" in result.output and "(valid)" in result.output
    summary = json.loads((out / "aggregate-bench.json").read_text())
    return Path(summary["data_point"]), summary


@pytest.mark.timeout(300)
def test_the_data_point_passes_ccl_bench_s_format_check(bench) -> None:
    folder, summary = bench
    assert check_data_point(folder) == [] and summary["check_problems"] == []
    assert sorted(p.name for p in folder.iterdir()) == ["rank0_trace.json", "rank1_trace.json", "run.sh",
                                                        f"{folder.name}.yaml"]
    card = yaml.safe_load((folder / f"{folder.name}.yaml").read_text())
    assert card["Model-executor"]["communication_library"]["name"] == "Gloo"
    assert card["workload"]["model"]["iteration"] == 2 * STEPS  # allreduce, then the selector's choice
    assert card["collection_notes"]["algorithms"] == {"allreduce": 2 * STEPS}  # n = 2: no StragglAR


@pytest.mark.timeout(300)
def test_communication_fraction_is_ccl_bench_s_on_the_real_trace(bench) -> None:
    folder, _ = bench
    ours = compute_metrics(load_data_point(folder)).communication_fraction
    theirs = ccl_bench_communication_fraction(folder)
    assert ours is not None and theirs is not None and 0 < theirs < 1
    assert ours == pytest.approx(theirs, rel=1e-12)


@pytest.mark.timeout(300)
def test_the_events_are_the_recorded_ones(bench) -> None:
    """Every kernel is a recorded gloo collective or the fold range, its profiler category kept; the ranks' steps
    start on one clock."""
    folder, _ = bench
    starts = {}
    for rank in (0, 1):
        document = json.loads((folder / f"rank{rank}_trace.json").read_text())
        assert document["distributedInfo"]["backend"] == "gloo"
        events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
        kernels = [e for e in events if e["cat"] == "kernel"]
        assert {e["args"]["recorded_cat"] for e in kernels} == {"user_annotation"}
        names = {e["name"] for e in kernels}
        assert "tier_fold_cohort" in names and "gloo:all_reduce" in names
        assert names <= {"tier_fold_cohort", "gloo:all_reduce", "gloo:all_gather", "gloo:send", "gloo:recv"}
        assert any(e["cat"] == "cpu_op" and e["name"] == "c10d::allreduce_" for e in events)
        starts[rank] = {e["name"]: e["ts"] for e in events if _STEP.match(e["name"])}
    assert len(starts[0]) == 2 * STEPS and starts[0].keys() == starts[1].keys()
    assert all(abs(starts[0][name] - starts[1][name]) < 1e6 for name in starts[0])
