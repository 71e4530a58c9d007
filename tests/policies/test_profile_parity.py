"""The default profile decides exactly as the monolithic PropiusPolicy it replaced (transitional check)."""

from __future__ import annotations

import pytest

from policies.profile import shipped_profile
from policies.propius_default import PropiusPolicy
from propius.simulator import SimConfig, Simulation, Workload, make_population
from propius.simulator.availability import AvailabilityModel
from propius.simulator.metrics import summarize
from propius.simulator.population import PopulationModel
from propius.simulator.workload import load_workload

MAKESPAN = {"longest_first": True, "scarce_first": True, "speed_tiers": False, "wait_for_faster": True,
            "hold_for_tight": True}


def _run(workload: Workload, clients: int, seed: int, policy, model: PopulationModel | None = None) -> dict:
    sim = Simulation(workload, make_population(clients, seed, model), policy, SimConfig(seed=seed))
    sim.run()
    out = summarize(sim, "x", 0.0).to_dict()
    out.pop("runtime_s", None)
    return out


@pytest.mark.parametrize(("name", "clients", "seed", "old", "profile", "availability"), [
    ("policy-20jobs", 2000, 0, {}, "default", "diurnal"),
    ("policy-20jobs", 3000, 1, {}, "default", "diurnal"),
    ("utilization-5jobs", 1200, 0, {}, "default", "always"),
    ("utilization-5jobs", 1500, 1, MAKESPAN, "makespan", "always"),
])
def test_default_profile_matches_the_old_class(name, clients, seed, old, profile, availability) -> None:
    workload = load_workload(name)
    model = PopulationModel(availability=AvailabilityModel(mode=availability))
    new = shipped_profile(profile).overridden({"starvation_bound": False}).policy()
    assert _run(workload, clients, seed, new, model) == _run(workload, clients, seed, PropiusPolicy(**old), model)
