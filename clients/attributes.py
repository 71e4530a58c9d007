"""The public profile of the machine the daemon runs on, for ``propius-client --detect``.

A real device advertises what it has (cores, memory, an accelerator, its OS) so jobs that require,
say, ``gpu in [yes]`` or ``ram >= 16`` can find it; values given explicitly override what is detected.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Mapping

from propius.specs import ClientProfile, DeviceClass

__all__ = ["detect_profile"]


def _cpus() -> int:
    """Cores this process may use: a container's CPU set, not the host's core count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _ram_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def _has_gpu() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def detect_profile(
    client_id: str,
    device_class: DeviceClass = DeviceClass.EDGE,
    numeric: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
) -> ClientProfile:
    """Detected ``cpus``, ``ram`` (GiB), ``gpu`` (yes/no) and ``os``, updated by ``numeric``/``labels``."""
    detected_numeric = {"cpus": float(_cpus()), "ram": round(_ram_gib(), 2)}
    detected_labels = {"gpu": "yes" if _has_gpu() else "no", "os": platform.system().lower()}
    return ClientProfile(
        client_id=client_id,
        device_class=device_class,
        numeric={**detected_numeric, **(numeric or {})},
        labels={**detected_labels, **(labels or {})},
    )
