"""Who a device is: a stable client id, its public profile, its private attributes and its seed.

Client ids persist per device index in a state directory, so a restarted daemon comes back as the
same devices (the control plane counts their work and history under that id).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clients.attributes import detect_profile
from propius.devices import load_dataset_sizes, load_devices
from propius.specs import AttributeValue, ClientProfile, DeviceClass

__all__ = ["DeviceIdentity", "client_id_for", "derive_seed", "detected_device", "simulated_devices"]


@dataclass(frozen=True)
class DeviceIdentity:
    """``private`` attributes never leave the device: only the device evaluates constraints on them."""

    index: int
    profile: ClientProfile
    seed: int
    private: Mapping[str, AttributeValue] = field(default_factory=dict)

    @property
    def client_id(self) -> str:
        return self.profile.client_id


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from its parts; stable across processes and Python versions (unlike ``hash``)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def client_id_for(index: int, state_dir: Path | None) -> str:
    """A new uuid4 hex, or the one stored for ``index`` in ``state_dir`` (created on first use)."""
    if state_dir is None:
        return uuid.uuid4().hex
    path = state_dir / f"device-{index}.id"
    if path.exists():
        return path.read_text().strip()
    state_dir.mkdir(parents=True, exist_ok=True)
    client_id = uuid.uuid4().hex
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(client_id + "\n")
    scratch.replace(path)
    return client_id


def simulated_devices(count: int, offset: int, seed: int, state_dir: Path | None = None) -> list[DeviceIdentity]:
    """Devices ``offset .. offset+count-1``, each a phone model and dataset size from the packaged data."""
    rows, sizes = load_devices(), load_dataset_sizes()
    identities = []
    for index in range(offset, offset + count):
        profile = rows[index % len(rows)].profile(client_id_for(index, state_dir))
        private = {"dataset_size": float(sizes[index % len(sizes)])}
        identities.append(DeviceIdentity(index, profile, derive_seed(seed, index), private))
    return identities


def detected_device(
    seed: int,
    state_dir: Path | None = None,
    device_class: DeviceClass = DeviceClass.EDGE,
    overrides: Mapping[str, AttributeValue] | None = None,
    dataset_size: int = 256,
) -> DeviceIdentity:
    """This machine as one device; ``overrides`` replace detected attributes (numbers numeric, text labels).

    ``dataset_size`` is private, like a simulated device's: jobs' private constraints are checked on it.
    """
    overrides = overrides or {}
    numeric = {name: float(value) for name, value in overrides.items() if not isinstance(value, str)}
    labels = {name: value for name, value in overrides.items() if isinstance(value, str)}
    profile = detect_profile(client_id_for(0, state_dir), device_class, numeric, labels)
    return DeviceIdentity(0, profile, derive_seed(seed, 0), {"dataset_size": float(dataset_size)})
