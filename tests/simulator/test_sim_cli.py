"""``propius simulate`` writes the same run that :func:`propius.simulator.simulate` makes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from propius.cli import app
from propius.simulator import PopulationModel, SimConfig, Workload, simulate
from propius.simulator.availability import AvailabilityModel
from propius.simulator.cli import output_stem
from propius.simulator.population import make_population
from propius.simulator.run import shortfalls

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
    written = json.loads((out / "tiny-propius-central-400-s3-longest_first=true-1d-always.json").read_text())

    always = PopulationModel(availability=AvailabilityModel(mode="always"), days=1)
    expected, _ = simulate(tiny, "propius", 400, 3, config=SimConfig(seed=3), options={"longest_first": True},
                           model=always)
    assert _without_timing(written) == _without_timing(json.loads(json.dumps(expected.to_dict())))
    diurnal, _ = simulate(tiny, "propius", 400, 3, options={"longest_first": True}, model=PopulationModel(days=1))
    assert written["makespan_s"] != diurnal.makespan_s  # the option did change the clients' traces


def test_the_cli_runs_a_policy_profile_file(tiny: Workload, tmp_path: Path) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    profile = tmp_path / "mine.yaml"
    profile.write_text("name: mine\nplugins: [{plugin: srsf}, {plugin: starvation_bound, options: {slowdown: 2}}]\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", str(workload), "--policy-profile", str(profile), "--clients", "400",
                                      "--days", "1", "--option", "fastest_wake=true", "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads((out / "tiny-profile-mine-central-400-s0-fastest_wake=true-1d.json").read_text())
    expected, _ = simulate(tiny, f"profile:{profile}", 400, 0, options={"fastest_wake": True},
                           model=PopulationModel(days=1))
    assert _without_timing(written) == _without_timing(json.loads(json.dumps(expected.to_dict())))


@pytest.mark.parametrize(("arguments", "named"), [
    (["--availability", "sometimes"], "unknown availability"),
    (["--clients", "0"], "--clients"),  # not "the workload's default"
    (["--clients", "-5"], "--clients"),
    (["--days", "0"], "--days"),
    (["--clients", "1000001"], "--clients"),  # a population is held in memory: bounded
    (["--days", "91"], "--days"),
    (["--seed", "-1"], "--seed"),
    (["--option", "speed_tiers=maybe"], "speed_tiers='maybe'"),
    (["--policy-profile", "no-such-profile.yaml"], "cannot read profile no-such-profile.yaml"),
    (["--option", "doom_guard.min_s=-1"], "plug-in 'doom_guard': option min_s=-1"),
])
def test_the_cli_refuses_bad_arguments_by_name(tiny: Workload, tmp_path: Path, arguments: list[str],
                                               named: str) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    result = CliRunner().invoke(app, ["simulate", str(workload), *arguments, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert named in " ".join(result.output.split())  # rich wraps long lines
    assert not (tmp_path / "out").exists()


def _strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_run_whose_jobs_do_not_finish_says_so_in_valid_json(tiny: Workload, tmp_path: Path) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["simulate", str(workload), "--clients", "25", "--days", "1",
                                      "--availability", "always", "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # rich wraps long lines
    always = PopulationModel(availability=AvailabilityModel(mode="always"), days=1)
    expected = shortfalls(tiny, make_population(25, 0, always))
    assert [(s.job, s.demand, s.eligible) for s in expected] == [("a", 20, 19), ("c", 30, 19)]
    assert all(f"warning: {s}" in said for s in expected)
    written = _strict_json((out / "tiny-propius-central-25-s0-1d-always.json").read_text())
    assert (written["finished"], written["unfinished"]) == (1, 2)
    assert [job["name"] for job in written["jobs"] if job["jct_s"] is None] == ["a", "c"]
    assert written["avg_jct_s"] == written["max_jct_s"] == written["jobs"][1]["jct_s"]  # b's alone
    assert "warning: 2 of 3 jobs did not finish within the 1-day horizon (a, c); the JCTs cover the 1 that did" \
        in said


def test_no_finished_job_means_no_jct_never_nan(tiny: Workload, tmp_path: Path) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    result = CliRunner().invoke(app, ["simulate", str(workload), "--clients", "5", "--days", "1",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = _strict_json((tmp_path / "tiny-propius-central-5-s0-1d.json").read_text())
    assert written["finished"] == 0 and written["unfinished"] == 3
    assert written["avg_jct_s"] is None and written["max_jct_s"] is None
    assert "nan" not in result.output.lower()
    assert re.search(r"avg_jct_s +│ n/a", result.output) and "there is no JCT" in " ".join(result.output.split())


def test_an_unknown_workload_lists_the_built_in_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "utilisation-5jobs", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "built-in: policy-20jobs, utilization-5jobs" in " ".join(result.output.split())


def test_runs_with_other_arguments_do_not_overwrite_each_other(tiny: Workload, tmp_path: Path) -> None:
    workload = tmp_path / "tiny.yaml"
    workload.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    out = tmp_path / "out"
    for extra in ([], ["--option", "longest_first=true"]):
        result = CliRunner().invoke(app, ["simulate", str(workload), "--days", "1", "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("*.json")) == [
        "tiny-propius-central-400-s0-1d.json", "tiny-propius-central-400-s0-longest_first=true-1d.json"]
    assert output_stem("w", "fair-share", "static", 10, 2, {"weights": {"b": 2, "a": 1}}, 4, "diurnal") == \
        'w-fair-share-static-10-s2-weights=_a_1,b_2_'
