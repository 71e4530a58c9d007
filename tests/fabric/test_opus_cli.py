"""The plan command on a real fabric file and job description (typer's runner, no mocks)."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from typer.testing import CliRunner

from propius.fabric.generators import rail_cluster
from propius.fabric_cli import fabric_app

EXAMPLE = Path(__file__).resolve().parents[2] / "propius" / "examples" / "opus-llama3-16.yaml"


def app() -> typer.Typer:
    return fabric_app


def fabric_file(tmp_path: Path, held: tuple[str, ...] = ()) -> Path:
    """A 4-host × 4-GPU OCS rail cluster; ``held`` accelerators are allocated to job 'j' in the file."""
    path = tmp_path / "fabric.yaml"
    data = rail_cluster(4, 4, rail_kind="ocs", rail_gbps=200, scale_up_gbps=2400).model_dump(
        mode="json", exclude_defaults=True)
    for acc in data["accelerators"]:
        if acc["id"] in held:
            acc.update(state="allocated", job="j")
    path.write_text(yaml.safe_dump(data))
    return path


def test_plan_prints_configurations_circuits_and_prediction(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["plan", "llama", "--fabric", str(fabric_file(tmp_path)),
                                        "--job-file", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "33 phases per iteration -> 2 configuration(s), 2 reconfiguration(s) per iteration" in out
    assert "rail0: 0->2 1->3 2->0 3->1" in out and "rail3: 0->1 1->0 2->3 3->2" in out  # PP pairs; DP rings
    assert "predicted iteration: always-connected" in out and "speculative" in out


def test_plan_with_explicit_phases_and_a_reconfig_override(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"phases": [
        {"name": "ring", "kind": "dp", "collective": "all-reduce", "groups": [[0, 1, 2, 3]], "bytes": 1e9},
        {"name": "pairs", "kind": "pp", "collective": "send-recv", "groups": [[0, 2]], "bytes": 1e8,
         "compute_ms": 20}]}))
    held = ("r0-h0-a0", "r0-h1-a0", "r0-h2-a0", "r0-h3-a0")  # the job's ranks 0..3, in fabric order
    result = CliRunner().invoke(app(), ["plan", "j", "--fabric", str(fabric_file(tmp_path, held)),
                                        "--job-file", str(job), "--reconfig-ms", "5"])
    assert result.exit_code == 0, result.output
    assert "reconfiguration 5 ms" in result.output and "2 configuration(s)" in result.output
    assert "rail0: 0->1 1->2 2->3 3->0" in result.output and "rail0: 0->2" in result.output


def test_plan_names_what_is_wrong(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"model": {"params": 1e9, "layers": 2, "hidden": 8}}))
    result = CliRunner().invoke(app(), ["plan", "j", "--fabric", str(fabric_file(tmp_path)), "--job-file", str(job)])
    assert result.exit_code == 2 and "'model' needs 'request'" in result.output
    job.write_text(yaml.safe_dump({"phases": [{"name": "x", "kind": "dp", "collective": "all-reduce",
                                              "groups": [[0, 1]], "bytes": 1}]}))
    result = CliRunner().invoke(app(), ["plan", "j", "--fabric", str(fabric_file(tmp_path)), "--job-file", str(job)])
    assert result.exit_code == 2 and "job 'j': holds no accelerators" in result.output
