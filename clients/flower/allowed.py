"""Which Flower apps this machine's owner lets a job run: ``PROPIUS_FLOWER_APPS``.

A ``flower-clientapp`` task names an app directory on the device and the ClientApp in it; running it
imports that directory's Python code. A job owner must not be able to make a device import whatever
code lies on its disk, so the device owner lists the app directories (or directories holding them),
separated by ``os.pathsep``; an offer for any other app is declined before it is accepted. Unset, no
Flower app runs.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV", "allowed_roots", "is_allowed"]

ENV = "PROPIUS_FLOWER_APPS"


def allowed_roots() -> list[Path]:
    return [Path(entry).resolve() for entry in os.environ.get(ENV, "").split(os.pathsep) if entry]


def is_allowed(app_dir: str) -> bool:
    app = Path(app_dir).resolve()
    return any(app == root or app.is_relative_to(root) for root in allowed_roots())
