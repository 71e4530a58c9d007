"""The robustness benchmark's ``--baseline``: FIFO's runs come from an earlier output where the simulation is the
same one, and only there; the policy under trial always runs; a file that is not such an output is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.policy_robustness import NOISE, load_baseline, task_key

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "policy_robustness.py"
TINY = json.dumps({"jobs": [2, 2], "clients": [2000, 2000], "rounds": [10, 10], "demand": [5, 5]})


def _sweep(tmp_path: Path, out: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--workloads", "1", "--seeds", "0", "--days", "1", "--family", TINY,
         "--workers", "1", "--out", str(tmp_path / out), *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)


def _runs(path: Path) -> dict[str, dict]:
    return {row["policy"]: row for row in json.loads(path.read_text())["runs"]}


def test_fifo_is_taken_from_the_baseline_and_the_policy_under_trial_runs(tmp_path: Path) -> None:
    first = _sweep(tmp_path, "fifo.json", "--policies", "fifo")
    assert first.returncode == 0, first.stderr
    again = _sweep(tmp_path, "srsf.json", "--policies", "fifo", "srsf", "--baseline", "fifo.json")
    assert again.returncode == 0, again.stderr
    assert "--baseline: 2 runs taken from fifo.json, 1 to run" in again.stdout  # FIFO and its noise row
    stored, now = _runs(tmp_path / "fifo.json"), _runs(tmp_path / "srsf.json")
    assert now["fifo"] == stored["fifo"] and now[NOISE] == stored[NOISE]  # the same rows, wall time and all
    assert "srsf" in now and "srsf" not in stored
    comparison = json.loads((tmp_path / "srsf.json").read_text())["comparison"]
    assert [e["family_seed"] for e in comparison["srsf"]] == [1000]


def test_a_different_simulation_is_not_taken_from_the_baseline(tmp_path: Path) -> None:
    assert _sweep(tmp_path, "fifo.json", "--policies", "fifo", "--no-noise").returncode == 0
    other_seed = _sweep(tmp_path, "b.json", "--policies", "fifo", "--no-noise", "--family-seed", "7",
                        "--baseline", "fifo.json")
    assert "--baseline: 0 runs taken from fifo.json, 1 to run" in other_seed.stdout, other_seed.stderr
    longer = _sweep(tmp_path, "c.json", "--policies", "fifo", "--no-noise", "--days", "2", "--baseline", "fifo.json")
    assert "--baseline: 0 runs taken from fifo.json, 1 to run" in longer.stdout, longer.stderr


def test_only_fifo_and_its_noise_row_are_reused(tmp_path: Path) -> None:
    family = {"jobs": [2, 2]}
    runs = [{"policy": policy, "part": 0, "family_seed": 3, "seed": 0}
            for policy in ("fifo", NOISE, "propius", "profile:default")]
    path = tmp_path / "base.json"
    path.write_text(json.dumps({"family": family, "days": 7, "runs": runs}))
    assert set(load_baseline(path)) == {task_key(family, 3, 0, policy, 7) for policy in ("fifo", NOISE)}


def test_a_file_that_is_not_the_benchmarks_output_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"runs": []}))  # no horizon: its runs cannot be matched
    refused = _sweep(tmp_path, "x.json", "--policies", "fifo", "--baseline", "bad.json")
    assert refused.returncode == 2 and "--baseline" in refused.stderr and "'days'" in refused.stderr
    assert not (tmp_path / "x.json").exists()
