"""Simulated clients: real phone models and dataset sizes, seeded bandwidth and availability.

Each client draws, from one seeded generator and independent of the policy under test:

- a phone model, uniformly from ``data/device_specs.csv``; its ``cpu_f``, ``ram``, ``fp16_mem`` and
  ``android_os`` are the public attributes job requirements match, and its ``ms_per_sample`` its
  speed, scaled so the population mean is ``compute_mean_ms`` (78 ms/sample, the published traces'
  mean; the file's own mean is 84);
- a local dataset size, uniformly from ``data/dataset_sizes.csv`` (the private ``dataset_size``);
- a bandwidth, ``LogNormal`` with mean ``bandwidth_mean_kbps`` (13,736 kbit/s) and log-sd
  ``bandwidth_sigma``;
- on/off windows from :class:`~propius.simulator.availability.AvailabilityModel`.

Clients sharing a phone model share one attribute dict (read-only), which keeps 100,000 clients cheap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from propius.devices import load_dataset_sizes, load_devices
from propius.simulator.availability import AvailabilityModel
from propius.specs import AttributeValue

__all__ = ["DATA_DIR", "MAX_CLIENTS", "MAX_DAYS", "Population", "PopulationModel", "make_population"]

DATA_DIR = Path(__file__).parent / "data"

# A population is held in memory, one trace per client: a million clients over 7 days take about 1.7 GB and
# two minutes to draw, so larger requests are refused rather than left to exhaust the machine.
MAX_CLIENTS = 1_000_000
MAX_DAYS = 90


@dataclass(frozen=True)
class PopulationModel:
    availability: AvailabilityModel = field(default_factory=AvailabilityModel)
    bandwidth_mean_kbps: float = 13_736.0
    bandwidth_sigma: float = 0.8
    compute_mean_ms: float = 78.0
    days: int = 4


@dataclass(frozen=True)
class Population:
    """Struct of arrays, indexed by client number."""

    profiles: list[dict[str, AttributeValue]]  # public attributes
    private: list[dict[str, AttributeValue]]  # evaluated on the device only
    s_per_sample: list[float]
    bandwidth_kbps: list[float]
    windows: list[list[tuple[float, float]]]
    horizon_s: float

    def __len__(self) -> int:
        return len(self.profiles)

    def task_s(self, client: int, work_samples: float, model_size_kbit: float) -> tuple[float, float, float]:
        """(download, train, upload) seconds of one task, by the published time model."""
        transfer = model_size_kbit / self.bandwidth_kbps[client]
        return transfer, work_samples * self.s_per_sample[client], transfer


def make_population(n: int, seed: int, model: PopulationModel | None = None) -> Population:
    model = model or PopulationModel()
    if not 1 <= n <= MAX_CLIENTS or not 1 <= model.days <= MAX_DAYS:
        raise ValueError(f"a population needs 1-{MAX_CLIENTS:,} clients and 1-{MAX_DAYS} days, got {n:,} and "
                         f"{model.days}")
    rng = np.random.default_rng([seed, n])
    devices = load_devices(DATA_DIR / "device_specs.csv")
    sizes = load_dataset_sizes(DATA_DIR / "dataset_sizes.csv")
    scale = model.compute_mean_ms / float(np.mean([d.ms_per_sample for d in devices]))
    device_profiles = [d.profile(d.name).attributes() for d in devices]
    rows = rng.integers(0, len(devices), n)
    size_rows = rng.integers(0, len(sizes), n)
    mu = math.log(model.bandwidth_mean_kbps) - model.bandwidth_sigma**2 / 2
    bandwidth = rng.lognormal(mu, model.bandwidth_sigma, n)
    windows = [model.availability.windows(rng, model.days) for _ in range(n)]
    private_by_size: dict[int, dict[str, AttributeValue]] = {}
    return Population(
        profiles=[device_profiles[r] for r in rows],
        private=[private_by_size.setdefault(sizes[s], {"dataset_size": float(sizes[s])}) for s in size_rows],
        s_per_sample=[devices[r].ms_per_sample * scale / 1000.0 for r in rows],
        bandwidth_kbps=[float(b) for b in bandwidth],
        windows=windows,
        horizon_s=model.days * 86_400.0,
    )
