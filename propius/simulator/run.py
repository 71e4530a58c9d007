"""One simulation run from names and numbers: what the CLI and the benchmark call."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies import Policy, load_policy
from propius.simulator.engine import SimConfig, Simulation
from propius.simulator.metrics import RunMetrics, summarize
from propius.simulator.population import Population, PopulationModel, make_population
from propius.simulator.workload import Workload

__all__ = ["Shortfall", "shortfalls", "simulate"]


@dataclass(frozen=True)
class Shortfall:
    """A job whose demand exceeds the clients that could ever serve it: its rounds can never fill."""

    job: str
    demand: int
    eligible: int
    clients: int

    def __str__(self) -> str:
        return (f"job {self.job!r} asks for {self.demand} clients per round, but only {self.eligible} of the "
                f"{self.clients} clients meet its requirements: it cannot finish")


def shortfalls(workload: Workload, population: Population) -> list[Shortfall]:
    """The jobs of ``workload`` that fewer eligible clients (public and private requirements) than their demand
    could serve; reporting only, the simulation itself is not affected."""
    found = []
    for job in workload.jobs:
        public, private = job.requirements.public, job.requirements.private
        eligible = sum(1 for attributes, secret in zip(population.profiles, population.private, strict=True)
                       if public.admits(attributes) and private.admits(secret))
        if eligible < job.demand:
            found.append(Shortfall(job.name, job.demand, eligible, len(population)))
    return found


def simulate(
    workload: Workload, policy: str | Policy, clients: int, seed: int, config: SimConfig | None = None,
    options: Mapping[str, Any] | None = None, population: Population | None = None,
    model: PopulationModel | None = None, label: str | None = None,
) -> tuple[RunMetrics, Simulation]:
    """Run ``workload`` under ``policy`` (a name, with ``options``, or a built policy) on ``clients`` seeded clients.

    ``population`` may be passed in to reuse the same traces across policies; it is never mutated.
    """
    config = config or SimConfig(seed=seed)
    population = population or make_population(clients, seed, model)
    built = load_policy(policy, **dict(options or {})) if isinstance(policy, str) else policy
    sim = Simulation(workload, population, built, config)
    started = time.perf_counter()
    sim.run()
    name = label or (policy if isinstance(policy, str) else built.name)
    return summarize(sim, name, time.perf_counter() - started), sim
