"""One simulation run from names and numbers: what the CLI and the benchmark call."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from policies import load_policy
from propius.simulator.engine import SimConfig, Simulation
from propius.simulator.metrics import RunMetrics, summarize
from propius.simulator.population import Population, PopulationModel, make_population
from propius.simulator.workload import Workload

__all__ = ["simulate"]


def simulate(
    workload: Workload, policy: str, clients: int, seed: int, config: SimConfig | None = None,
    options: Mapping[str, Any] | None = None, population: Population | None = None,
    model: PopulationModel | None = None, label: str | None = None,
) -> tuple[RunMetrics, Simulation]:
    """Run ``workload`` under ``policy`` (with ``options``) on ``clients`` seeded clients.

    ``population`` may be passed in to reuse the same traces across policies; it is never mutated.
    """
    config = config or SimConfig(seed=seed)
    population = population or make_population(clients, seed, model)
    sim = Simulation(workload, population, load_policy(policy, **dict(options or {})), config)
    started = time.perf_counter()
    sim.run()
    return summarize(sim, label or policy, time.perf_counter() - started), sim
