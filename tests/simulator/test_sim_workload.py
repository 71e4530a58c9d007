"""Workload files are validated before a run: what would silently mis-simulate is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from propius.simulator import Workload
from propius.simulator.population import MAX_CLIENTS, MAX_DAYS, PopulationModel, make_population
from propius.simulator.workload import builtin_workloads, load_workload
from propius.specs import SpecError


def _written(tmp_path: Path, workload: dict) -> Path:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload))
    return path


def test_the_packaged_workloads_load_by_name() -> None:
    assert [len(load_workload(name).jobs) for name in ("policy-20jobs", "utilization-5jobs")] == [20, 5]
    assert load_workload("utilization-5jobs").client_counts == [1200, 1500, 1800]


def test_an_unknown_name_lists_the_built_in_workloads() -> None:
    assert builtin_workloads() == ["policy-20jobs", "utilization-5jobs"]
    with pytest.raises(SpecError) as error:
        load_workload("utilisation-5jobs")
    assert str(error.value) == ("workload: no file 'utilisation-5jobs' and no built-in workload of that name; "
                                "built-in: policy-20jobs, utilization-5jobs")


def test_two_jobs_with_one_name_are_refused(tiny: Workload, tmp_path: Path) -> None:
    data = tiny.model_dump(mode="json")
    data["jobs"][1]["name"] = data["jobs"][0]["name"]  # the simulator, like the control plane, keys jobs by name
    with pytest.raises(SpecError, match="two jobs are named 'a'"):
        load_workload(_written(tmp_path, data))


@pytest.mark.parametrize("clients", [0, -3, [], [1200, 0], 1_000_001, [1200, 10**9]])
def test_client_counts_must_be_positive_and_bounded(tiny: Workload, tmp_path: Path, clients: object) -> None:
    data = {**tiny.model_dump(mode="json"), "clients": clients}
    with pytest.raises(SpecError, match="clients"):
        load_workload(_written(tmp_path, data))


def test_a_population_past_the_bound_is_refused_before_it_is_drawn() -> None:
    with pytest.raises(ValueError, match="1-1,000,000 clients and 1-90 days, got 1,000,001 and 7"):
        make_population(MAX_CLIENTS + 1, 0, PopulationModel(days=7))
    with pytest.raises(ValueError, match="got 10 and 91"):
        make_population(10, 0, PopulationModel(days=MAX_DAYS + 1))
