"""PropiusSelected on Flower's own simulation runtime: the nodes that reply are the ones Propius chose."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = Path(__file__).with_name("sim_selected.py")
DEMAND = 3


def simulate(server: str, attempts: int = 2) -> dict:
    """Run the simulation; a Ray that does not come up in time (an overloaded machine) is tried once more."""
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "PYTHONPATH": str(REPO)}
    for attempt in range(attempts):
        try:
            done = subprocess.run([sys.executable, str(SCRIPT), server], capture_output=True, text=True,
                                  timeout=150, env=env, cwd=REPO)
            break
        except subprocess.TimeoutExpired:
            if attempt == attempts - 1:
                raise
    assert done.returncode == 0 and done.stdout.strip(), done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(330)
async def test_nodes_that_reply_are_the_ones_propius_selected(plane):
    result = await asyncio.to_thread(simulate, plane.address)
    ram = {int(node): value for node, value in result["ram"].items()}
    history = result["history"]
    assert len(ram) == 8
    assert len(history) == 4  # train and evaluate of 2 rounds, one Propius round each
    for selection in history:
        assert all(ram[node] >= 6 for node in selection["selected"])
        assert sorted(selection["replied"]) == sorted(selection["selected"])
    # The simulation registers its nodes while the ServerApp starts: the first round may see only some.
    assert [len(s["selected"]) for s in history[1:]] == [DEMAND] * 3
    (job,) = [j for j in plane.store.list_jobs() if j.name == "flower-selection" and j.state == "completed"]
    assert job.rounds_done == 4
