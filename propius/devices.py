"""Realistic device attributes for simulated clients, read from the packaged sample in ``propius/data``.

Simulated devices take their public profile from a real phone model, so job requirements such as
``cpu_f >= 7`` or ``ram >= 6`` split a simulated pool the way they would split a real one.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from propius.specs import ClientProfile, DeviceClass

__all__ = ["DeviceRow", "load_dataset_sizes", "load_devices"]


@dataclass(frozen=True)
class DeviceRow:
    """One phone model; ``ram`` (GB) is the CSV's ``ram_gb`` under the name job requirements use."""

    name: str
    cpu_f: float
    ram: float
    fp16_mem: float
    android_os: float
    ms_per_sample: float

    def profile(self, client_id: str) -> ClientProfile:
        """The public profile; ``ms_per_sample`` stays out, it is a speed, not an advertised attribute."""
        return ClientProfile(
            client_id=client_id,
            device_class=DeviceClass.EDGE,
            numeric={"cpu_f": self.cpu_f, "ram": self.ram, "fp16_mem": self.fp16_mem, "android_os": self.android_os},
            labels={"device": self.name},
        )


def _read(path: Path | None, name: str) -> list[dict[str, str]]:
    text = path.read_text() if path is not None else resources.files("propius.data").joinpath(name).read_text()
    return list(csv.DictReader(text.splitlines()))


def load_devices(path: Path | None = None) -> list[DeviceRow]:
    """Device rows from ``path`` (same columns as ``propius/data/devices.csv``) or the packaged file."""
    return [
        DeviceRow(
            name=row["device"],
            cpu_f=float(row["cpu_f"]),
            ram=float(row["ram_gb"]),
            fp16_mem=float(row["fp16_mem"]),
            android_os=float(row["android_os"]),
            ms_per_sample=float(row["ms_per_sample"]),
        )
        for row in _read(path, "devices.csv")
    ]


def load_dataset_sizes(path: Path | None = None) -> list[int]:
    """Per-client local dataset sizes (samples) from ``path`` or the packaged file."""
    return [int(row["samples"]) for row in _read(path, "dataset_sizes.csv")]
