"""``propius simulate`` writes the same run that :func:`propius.simulator.simulate` makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from propius.cli import app
from propius.simulator import PopulationModel, SimConfig, Workload, simulate
from propius.simulator.availability import AvailabilityModel

TIMING = ("wall_s", "events_per_s")  # the only fields that depend on the machine


def _without_timing(metrics: dict) -> dict:
    return {key: value for key, value in metrics.items() if key not in TIMING}


def test_the_cli_reproduces_a_run_on_always_available_clients(tiny: Workload, tmp_path: Path) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", str(workload), "--policy", "propius", "--clients", "400",
                                      "--seed", "3", "--days", "1", "--availability", "always",
                                      "--option", "longest_first=true", "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads((out / "tiny-propius-central-400-s3-always.json").read_text())

    always = PopulationModel(availability=AvailabilityModel(mode="always"), days=1)
    expected, _ = simulate(tiny, "propius", 400, 3, config=SimConfig(seed=3), options={"longest_first": True},
                           model=always)
    assert _without_timing(written) == _without_timing(json.loads(json.dumps(expected.to_dict())))
    diurnal, _ = simulate(tiny, "propius", 400, 3, options={"longest_first": True}, model=PopulationModel(days=1))
    assert written["makespan_s"] != diurnal.makespan_s  # the option did change the clients' traces


@pytest.mark.parametrize(("arguments", "named"), [
    (["--availability", "sometimes"], "unknown availability"),
    (["--clients", "0"], "--clients"),  # not "the workload's default"
    (["--clients", "-5"], "--clients"),
    (["--days", "0"], "--days"),
    (["--seed", "-1"], "--seed"),
    (["--option", "speed_tiers=maybe"], "speed_tiers='maybe'"),
])
def test_the_cli_refuses_bad_arguments_by_name(tiny: Workload, tmp_path: Path, arguments: list[str],
                                               named: str) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    result = CliRunner().invoke(app, ["simulate", str(workload), *arguments, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert named in " ".join(result.output.split())  # rich wraps long lines
    assert not (tmp_path / "out").exists()
