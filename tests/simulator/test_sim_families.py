"""Workload families: seeded, valid, of the requested structure, and runnable by the simulator."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from propius.cli import app
from propius.simulator.availability import AvailabilityModel
from propius.simulator.engine import SimConfig
from propius.simulator.families import STRUCTURES, WorkloadFamily, generate
from propius.simulator.population import PopulationModel
from propius.simulator.run import simulate
from propius.simulator.workload import Workload

SMALL = WorkloadFamily(jobs=(3, 4), rounds=(2, 3), demand=(5, 20), clients=(600, 800), availability="always")


def test_a_family_and_seed_fix_the_workload() -> None:
    assert generate(WorkloadFamily(), 7) == generate(WorkloadFamily(), 7)
    assert generate(WorkloadFamily(), 7).workload != generate(WorkloadFamily(), 8).workload


def test_a_generated_workload_is_an_ordinary_workload_file() -> None:
    drawn = generate(WorkloadFamily(structure="mixed"), 3)
    import yaml

    assert Workload.model_validate(yaml.safe_load(drawn.to_yaml())) == drawn.workload


@pytest.mark.parametrize(("structure", "seed"), itertools.product(STRUCTURES, range(4)))
def test_classes_have_the_structure_asked_for(structure: str, seed: int) -> None:
    drawn = generate(WorkloadFamily(structure=structure, classes=(3, 4)), seed)
    shares = list(drawn.class_share.values())
    assert drawn.structure == structure and all(0 < s <= 1 for s in shares)
    if structure == "superset":
        assert 1.0 in shares and any(s < 1 for s in shares)
    if structure == "nested":
        assert all(s < 1 for s in shares)  # the loosest tier leaves some clients out
    if structure == "disjoint":
        assert sum(shares) == pytest.approx(1.0)  # ranges that cut one attribute: each client in one class


def test_demand_fits_the_class_it_was_drawn_for() -> None:
    family = WorkloadFamily()
    for seed in range(10):
        drawn = generate(family, seed)
        online = drawn.workload.clients * 0.07
        for job in drawn.workload.jobs:
            share = drawn.class_share[job.requirements.public.to_json()]
            assert job.demand == 5 or job.demand * job.over_selection <= family.max_demand_share * share * online + 1


def test_timeout_ranges_are_drawn_per_job_and_fixed_ones_change_no_other_draw() -> None:
    drawn = generate(WorkloadFamily(schedule_timeout_s=(30, 600), execution_timeout_s=(60, 900)), 5)
    schedules = [job.schedule_timeout_s for job in drawn.workload.jobs]
    executions = [job.execution_timeout_s for job in drawn.workload.jobs]
    assert all(30 <= s <= 600 for s in schedules) and all(60 <= e <= 900 for e in executions)
    assert len(set(schedules)) > 1 and len(set(executions)) > 1
    default = generate(WorkloadFamily(), 5).workload
    fixed = generate(WorkloadFamily(schedule_timeout_s=(120, 120), execution_timeout_s=(180, 180)), 5).workload
    assert fixed == default  # the benchmark's families stay the workloads they were
    assert {(j.schedule_timeout_s, j.execution_timeout_s) for j in default.jobs} == {(120.0, 180.0)}


def test_bad_ranges_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ValidationError, match="demand"):
        WorkloadFamily(demand=(50, 10))
    with pytest.raises(ValidationError, match="clients: at most 1,000,000"):
        WorkloadFamily(clients=(2_000, 2_000_000))
    with pytest.raises(ValidationError, match="execution_timeout_s: at most"):
        WorkloadFamily(execution_timeout_s=(60, 1e7))


@pytest.mark.parametrize(("arguments", "named"), [
    (["--seed", "-1"], "--seed"),
    (["--jobs", "10-5"], "jobs: need 0 < low <= high"),
    (["--demand", "many"], "--demand"),
    (["--structure", "tree"], "structure"),
    (["--execution-timeout", "0-60"], "execution_timeout_s: need 0 < low <= high"),
    (["--schedule-timeout", "soon"], "--schedule-timeout"),
])
def test_the_generate_command_refuses_bad_arguments_by_name(tmp_path: Path, arguments: list[str], named: str) -> None:
    result = CliRunner().invoke(app, ["workload", "generate", str(tmp_path / "out"), *arguments])
    assert result.exit_code == 2
    assert named in " ".join(result.output.split())  # rich wraps long lines
    assert not (tmp_path / "out").exists()


def test_the_simulator_runs_a_drawn_workload_to_the_end() -> None:
    drawn = generate(SMALL, 1)
    metrics, _ = simulate(drawn.workload, "fifo", drawn.workload.clients, 1, config=SimConfig(seed=1),
                          model=PopulationModel(availability=AvailabilityModel(mode="always")))
    assert metrics.unfinished == 0 and len(metrics.jobs) == len(drawn.workload.jobs)
