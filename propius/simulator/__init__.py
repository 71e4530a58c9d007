"""Trace-driven, discrete-event simulation of many FL jobs sharing one client pool (``propius simulate``)."""

from propius.simulator.engine import SimConfig, Simulation
from propius.simulator.metrics import RunMetrics, summarize
from propius.simulator.population import Population, PopulationModel, make_population
from propius.simulator.run import simulate
from propius.simulator.workload import Workload, WorkloadJob, load_workload

__all__ = [
    "Population",
    "PopulationModel",
    "RunMetrics",
    "SimConfig",
    "Simulation",
    "Workload",
    "WorkloadJob",
    "load_workload",
    "make_population",
    "simulate",
    "summarize",
]
