"""``aggregate-bench`` refuses what it cannot run before building any update, and takes the selector's link cost
from a fabric (the run itself: tests/trace/test_trace_tier_export.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_plane.collectives.cost import LinkCost
from propius.fabric.model import load_fabric
from propius.fabric_bench_cli import app, fabric_link

EXAMPLE = Path(__file__).parents[2] / "propius" / "examples" / "fabric-small.yaml"


@pytest.mark.parametrize(("args", "hint"), [
    (["--shards", "1"], "--shards"),
    (["--shards", "17"], "--shards"),
    (["--dtype", "int8"], "--dtype"),
    (["--size-mib", "0"], "--size-mib"),
    (["--size-mib", "300"], "--size-mib"),
    (["--shards", "16", "--updates-per-shard", "64", "--size-mib", "2"], "--size-mib"),
    (["--updates-per-shard", "0"], "--updates-per-shard"),
])
def test_refused_before_anything_runs(tmp_path: Path, args: list[str], hint: str) -> None:
    result = CliRunner().invoke(app, [*args, "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2 and hint in result.output
    assert not (tmp_path / "out").exists()


def test_an_unreadable_fabric_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("sites: 3\n")
    result = CliRunner().invoke(app, ["--fabric", str(tmp_path / "bad.yaml"), "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 2 and "cannot read an input" in result.output


def test_the_link_cost_comes_from_the_fabric_s_first_rail() -> None:
    # rail0: an EPS rail of 400 Gb/s; the NIC links onto it have 2 µs latency
    assert fabric_link(load_fabric(EXAMPLE)) == LinkCost.of(latency_us=2.0, bandwidth_gbps=400.0)
