from __future__ import annotations

import pytest

from propius.simulator import PopulationModel, Workload
from propius.simulator.availability import AvailabilityModel


def _job(name: str, arrival: float, demand: int, cpu_min: float, rounds: int = 3) -> dict:
    return {
        "name": name, "arrival_s": arrival, "demand": demand, "rounds": rounds, "over_selection": 1.3,
        "schedule_timeout_s": 120, "execution_timeout_s": 180, "model_size_kbit": 20_000, "local_steps": 5,
        "batch_size": 10, "requirements": {"public": {"cpu_f": {"min": cpu_min}},
                                           "private": {"dataset_size": {"min": 100}}},
    }


@pytest.fixture
def tiny() -> Workload:
    """Three jobs, two nested classes, a few rounds: a whole simulation in well under a second."""
    return Workload.model_validate({
        "name": "tiny", "clients": 400,
        "jobs": [_job("a", 0, 20, 3), _job("b", 10, 10, 7), _job("c", 50, 30, 3, rounds=4)],
    })


@pytest.fixture
def day() -> PopulationModel:
    return PopulationModel(availability=AvailabilityModel(mean_session_h=6.0), days=1)
