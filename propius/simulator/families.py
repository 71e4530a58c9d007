"""Workload families: seeded multi-job workloads drawn from documented distributions.

A policy tuned on one workload file can lose on the next one. A family describes a space of
workloads (how many jobs, how their eligibility classes relate, demand, rounds, task shape, arrivals,
population size) and :func:`generate` draws one ordinary :class:`~propius.simulator.workload.Workload`
from it per seed, so a policy can be judged on many workloads nobody tuned it on. A family is named by
its parameters and a seed (:meth:`WorkloadFamily.label`).

Eligibility classes are built on the public attributes of the shipped device table (``cpu_f``,
``ram``, ``fp16_mem``, ``android_os``), at quantiles of that table, so a class's share of a simulated
population is known when the workload is drawn:

- ``nested``: each class raises the thresholds of the one before (every client of a strict class is
  in all looser ones: the Propius/Venn experiments' tiers);
- ``disjoint``: classes cut one attribute into ranges (no client in two classes);
- ``overlapping``: classes are overlapping windows of one attribute, or thresholds on different
  attributes;
- ``superset``: one class admits every client, the others are strict;
- ``mixed``: classes drawn from all of the above.

Draws (all from one ``numpy`` generator seeded by ``seed``): the number of jobs and classes uniformly;
demand, rounds, model size and the population log-uniformly (they span orders of magnitude); local
steps uniformly; each job's class uniformly among the classes. A job's demand is capped so that its
bind target fits in ``max_demand_share`` of its class's expected online clients (a workload whose
jobs cannot run at all measures nothing). Arrivals: ``batch`` (all at 0), ``poisson`` (exponential
gaps of mean ``mean_gap_s``) or ``bursty`` (Poisson bursts of several jobs within a minute). A job's
schedule and execution timeouts are 120 s and 180 s, or, given as ranges, drawn log-uniformly per job
(deadlines differ across real jobs, and several rules of the default read a round's time limit).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from propius.devices import DeviceRow, load_dataset_sizes, load_devices
from propius.simulator.population import DATA_DIR, MAX_CLIENTS
from propius.simulator.workload import Workload, WorkloadJob
from propius.specs import MAX_TIMEOUT_S, Constraint, Constraints, Requirements

__all__ = ["STRUCTURES", "GeneratedWorkload", "WorkloadFamily", "generate"]

Structure = Literal["nested", "disjoint", "overlapping", "superset", "mixed"]
STRUCTURES: tuple[Structure, ...] = ("nested", "disjoint", "overlapping", "superset", "mixed")
Arrival = Literal["batch", "poisson", "bursty"]
ATTRIBUTES = ("cpu_f", "ram", "fp16_mem", "android_os")
ONLINE_SHARE = {"diurnal": 0.07, "always": 1.0}  # mean share of a population online (availability.py)
MODELS = ("mlp", "resnet18", "mobilenet_v2", "shufflenet", "albert")


class WorkloadFamily(BaseModel):
    """The distributions a workload is drawn from; ranges are inclusive ``[low, high]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: tuple[int, int] = (5, 60)
    classes: tuple[int, int] = (2, 5)
    structure: Structure | Literal["any"] = "any"  # any: one of STRUCTURES per workload
    demand: tuple[int, int] = (5, 1000)
    rounds: tuple[int, int] = (10, 500)
    model_size_kbit: tuple[float, float] = (1_000.0, 100_000.0)
    local_steps: tuple[int, int] = (5, 20)  # x 3 passes x batch at ~78 ms per sample: fits the 180 s deadline
    batch_size: int = Field(default=20, ge=1)
    arrival: Arrival | Literal["any"] = "any"
    mean_gap_s: float = Field(default=1800.0, gt=0)
    clients: tuple[int, int] = (2_000, 50_000)
    availability: Literal["diurnal", "always"] = "diurnal"
    over_selection: float = Field(default=1.3, ge=1.0)
    max_demand_share: float = Field(default=0.5, gt=0, le=1)
    private_share: float = Field(default=0.5, ge=0, le=1, description="jobs with a private dataset_size minimum")
    # A job's time to bind its clients and their time to deliver: fixed by default, drawn per job when a range.
    schedule_timeout_s: tuple[float, float] = (120.0, 120.0)
    execution_timeout_s: tuple[float, float] = (180.0, 180.0)

    @model_validator(mode="after")
    def _ranges(self) -> WorkloadFamily:
        for name in ("jobs", "classes", "demand", "rounds", "model_size_kbit", "local_steps", "clients",
                     "schedule_timeout_s", "execution_timeout_s"):
            low, high = getattr(self, name)
            if not 0 < low <= high:
                raise ValueError(f"{name}: need 0 < low <= high, got [{low}, {high}]")
        for name in ("schedule_timeout_s", "execution_timeout_s"):
            if getattr(self, name)[1] > MAX_TIMEOUT_S:
                raise ValueError(f"{name}: at most {MAX_TIMEOUT_S:,.0f} s, got {getattr(self, name)[1]:,.0f}")
        if self.clients[1] > MAX_CLIENTS:
            raise ValueError(f"clients: at most {MAX_CLIENTS:,}, got {self.clients[1]:,}")
        return self

    def label(self, seed: int) -> str:
        """A name that identifies the workload: the parameters that differ from the defaults, and the seed."""
        changed = {k: v for k, v in self.model_dump().items() if v != WorkloadFamily.model_fields[k].default}
        parts = [f"{k}={'-'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in sorted(changed.items())]
        return "family" + "".join(f"_{p}" for p in parts) + f"_seed{seed}"


class GeneratedWorkload(BaseModel):
    """A drawn workload, with the structure and availability it was drawn for."""

    model_config = ConfigDict(frozen=True)

    workload: Workload
    structure: Structure
    arrival: Arrival
    availability: Literal["diurnal", "always"]
    class_share: dict[str, float]  # eligibility class -> share of the device table it admits

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.workload.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                              sort_keys=False)


def generate(family: WorkloadFamily, seed: int) -> GeneratedWorkload:
    """One workload of ``family``; the same (family, seed) always gives the same workload."""
    rng = np.random.default_rng(seed)
    devices = load_devices(DATA_DIR / "device_specs.csv")
    sizes = sorted(load_dataset_sizes(DATA_DIR / "dataset_sizes.csv"))
    structure: Structure = family.structure if family.structure != "any" else STRUCTURES[rng.integers(len(STRUCTURES))]
    arrival: Arrival = family.arrival if family.arrival != "any" else ("batch", "poisson", "bursty")[rng.integers(3)]
    clients = _log_uniform_int(rng, *family.clients)
    classes = _classes(rng, devices, structure, int(rng.integers(family.classes[0], family.classes[1] + 1)))
    shares = {c.to_json(): _share(c, devices) for c in classes}
    online = clients * ONLINE_SHARE[family.availability]
    n_jobs = int(rng.integers(family.jobs[0], family.jobs[1] + 1))
    arrivals = _arrivals(rng, arrival, n_jobs, family.mean_gap_s)
    jobs = []
    for index in range(n_jobs):
        public = classes[int(rng.integers(len(classes)))]
        room = family.max_demand_share * shares[public.to_json()] * online / family.over_selection
        if room < family.demand[0]:  # too strict for this population: the loosest class instead
            public = max(classes, key=lambda c: shares[c.to_json()])
            room = family.max_demand_share * shares[public.to_json()] * online / family.over_selection
        demand = _log_uniform_int(rng, family.demand[0], max(family.demand[0], min(family.demand[1], int(room))))
        private = Constraints({})
        if rng.random() < family.private_share:
            private = Constraints({"dataset_size": Constraint(min=float(sizes[int(rng.integers(len(sizes) // 2))]))})
        jobs.append(WorkloadJob(
            name=f"job-{index:02d}", arrival_s=round(arrivals[index], 1), demand=demand,
            rounds=_log_uniform_int(rng, *family.rounds), over_selection=family.over_selection,
            schedule_timeout_s=_log_uniform(rng, *family.schedule_timeout_s),
            execution_timeout_s=_log_uniform(rng, *family.execution_timeout_s),
            model=MODELS[int(rng.integers(len(MODELS)))],
            model_size_kbit=round(float(math.exp(rng.uniform(*np.log(family.model_size_kbit)))), 1),
            local_steps=int(rng.integers(family.local_steps[0], family.local_steps[1] + 1)),
            batch_size=family.batch_size, requirements=Requirements(public=public, private=private),
        ))
    workload = Workload(
        name=family.label(seed), clients=clients, jobs=jobs,
        description=f"{n_jobs} jobs, {structure} eligibility classes, {arrival} arrivals, {clients} clients "
                    f"({family.availability} availability); drawn by propius.simulator.families",
    )
    return GeneratedWorkload(workload=workload, structure=structure, arrival=arrival,
                             availability=family.availability, class_share=shares)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    """A value drawn log-uniformly, to a whole number; a fixed one draws nothing, so it leaves every later draw as
    it was."""
    return float(round(math.exp(rng.uniform(math.log(low), math.log(high))))) if high > low else float(low)


def _log_uniform_int(rng: np.random.Generator, low: int, high: int) -> int:
    return int(_log_uniform(rng, low, high))


def _arrivals(rng: np.random.Generator, arrival: Arrival, n: int, mean_gap_s: float) -> list[float]:
    if arrival == "batch":
        return [0.0] * n
    if arrival == "poisson":
        return list(np.cumsum(rng.exponential(mean_gap_s, n)))
    times: list[float] = []
    at = 0.0
    while len(times) < n:  # bursts of 2-6 jobs within a minute, bursts a Poisson process
        at += float(rng.exponential(mean_gap_s * 4))
        times += [at + float(rng.uniform(0, 60)) for _ in range(int(rng.integers(2, 7)))]
    return sorted(times[:n])


def _quantile(devices: list[DeviceRow], attribute: str, q: float) -> float:
    return float(np.quantile([getattr(d, attribute) for d in devices], q))


def _at_least(devices: list[DeviceRow], pairs: dict[str, float]) -> Constraints:
    return Constraints({a: Constraint(min=_quantile(devices, a, q)) for a, q in pairs.items() if q > 0})


def _window(devices: list[DeviceRow], attribute: str, low_q: float, high_q: float) -> Constraints:
    low, high = _quantile(devices, attribute, low_q), _quantile(devices, attribute, high_q)
    if high_q < 1:  # max is inclusive: stop at the last value under the next window's start
        high = max((v for d in devices if low <= (v := getattr(d, attribute)) < high), default=low)
    return Constraints({attribute: Constraint(min=low, max=high)})


def _classes(rng: np.random.Generator, devices: list[DeviceRow], structure: Structure, k: int) -> list[Constraints]:
    """``k`` distinct eligibility classes of the given structure."""
    attribute = ATTRIBUTES[int(rng.integers(2))]  # cpu_f or ram: the attributes with the widest spread
    if structure == "nested":
        steps = sorted(rng.uniform(0.05, 0.85, k))  # the loosest class leaves some clients out (see superset)
        return [_at_least(devices, {attribute: q, "android_os": q / 2}) for q in steps]
    if structure == "disjoint":
        cuts = [0.0, *sorted(rng.uniform(0.15, 0.85, k - 1)), 1.0]
        return [_window(devices, attribute, cuts[i], cuts[i + 1]) for i in range(k)]
    if structure == "overlapping":
        if rng.random() < 0.5:
            starts = sorted(rng.uniform(0.0, 0.6, k))
            return [_window(devices, attribute, q, min(1.0, q + 0.4)) for q in starts]
        return [_at_least(devices, {ATTRIBUTES[i % len(ATTRIBUTES)]: float(rng.uniform(0.2, 0.7))}) for i in range(k)]
    if structure == "superset":
        return [Constraints({}), *_classes(rng, devices, "nested", k - 1)]
    mixed = [_classes(rng, devices, STRUCTURES[int(rng.integers(4))], 2)[int(rng.integers(2))] for _ in range(k)]
    return list({c.to_json(): c for c in mixed}.values())


def _share(constraints: Constraints, devices: list[DeviceRow]) -> float:
    """The share of the device table (and so, in expectation, of a population) the class admits."""
    return sum(constraints.admits({a: getattr(d, a) for a in ATTRIBUTES}) for d in devices) / len(devices)
