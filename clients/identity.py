"""Who a device is: a stable client id, its public profile, its private attributes and its seed.

Client ids persist per device index in a state directory, so a restarted daemon comes back as the
same devices (the control plane counts their work and history under that id).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clients.attributes import detect_profile
from propius.devices import load_dataset_sizes, load_devices
from propius.specs import AttributeValue, ClientProfile, DeviceClass

__all__ = [
    "OFFSET_RANGE",
    "DeviceIdentity",
    "client_id_for",
    "default_device_offset",
    "derive_seed",
    "detected_device",
    "simulated_devices",
]

OFFSET_RANGE = 1 << 40
"""A default device offset is drawn below this: two daemons of N devices each share a device with a chance of
about 2N / 2^40, and the phone models (index modulo the packaged rows) start at a random row."""


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


def _stored(path: Path, new: str) -> str:
    """The text stored at ``path``, or ``new`` after storing it there (atomically, on first use)."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(new + "\n")
    scratch.replace(path)
    return new


def client_id_for(index: int, state_dir: Path | None) -> str:
    """A new uuid4 hex, or the one stored for ``index`` in ``state_dir`` (created on first use)."""
    if state_dir is None:
        return uuid.uuid4().hex
    return _stored(state_dir / f"device-{index}.id", uuid.uuid4().hex)


def default_device_offset(state_dir: Path | None) -> int:
    """The first device index of a daemon not told one: drawn at random below ``OFFSET_RANGE``, kept in
    ``state_dir`` (``device-offset``) so a restarted daemon comes back as the same devices. Two daemons started
    with defaults so simulate different phones (model, dataset size, seed and id all follow the index)."""
    drawn = str(secrets.randbelow(OFFSET_RANGE))
    return int(drawn if state_dir is None else _stored(state_dir / "device-offset", drawn))


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
