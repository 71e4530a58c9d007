"""The fabric picture (``propius.fabric.plot.render_png``): a valid PNG of sensible size for a rail fabric and
for torus racks holding contiguous, fragmented, spare and failed accelerators."""

from __future__ import annotations

import struct
from importlib import resources
from pathlib import Path

import pytest

from policies.placement.torus import TorusPlacement
from propius.fabric import AcceleratorState, Allocation, CloudRequest, FabricState, load_fabric
from propius.fabric.generators import torus_racks
from propius.fabric.plot import render_png
from propius.fabric.torus import RackGrid

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_example_rail_fabric_renders(tmp_path: Path) -> None:
    example = resources.files("propius") / "examples" / "fabric-small.yaml"
    state = FabricState(load_fabric(Path(str(example))))
    out = tmp_path / "small.png"
    render_png(state, out)
    width, height = _png_size(out)
    assert 400 <= width <= 3000 and 200 <= height <= 3000
    assert out.stat().st_size > 5_000  # drawn, not blank


def test_torus_racks_with_fragmented_spare_and_failed_accelerators_render(tmp_path: Path) -> None:
    state = FabricState(torus_racks(2))
    placer = TorusPlacement(fragmented=True, time_budget_s=0.2)
    r0, r1 = RackGrid.of(state, "r0"), RackGrid.of(state, "r1")
    # r0: every other server held, so no aligned 2x4x4 block is free but eight whole servers are.
    for k, host in enumerate(r0.host_at.values()):
        if k % 2:
            state.allocate(f"r0-small{k}", Allocation(tuple(r0.host_accelerators(host))))
    # r1: a contiguous 4x4x2 at z 0..1 and the z=3 servers held: four free servers, too few for 2x4x4.
    big = placer.place(CloudRequest(count=32, shape=(4, 4, 2)), state)
    assert isinstance(big, Allocation) and "in r1" in big.how
    state.allocate("big", big)
    for cell, host in r1.host_at.items():
        if cell[2] == 3:
            state.allocate(f"r1-small{cell}", Allocation(tuple(r1.host_accelerators(host))))
    frag = placer.place(CloudRequest(count=32, shape=(2, 4, 4)), state)
    assert isinstance(frag, Allocation) and frag.how.startswith("fragmented"), frag
    state.allocate("frag", frag)
    state.set_state(r1.host_accelerators(r1.host_at[(0, 0, 2)])[0], AcceleratorState.SPARE)
    state.fail(big.accelerators[0])
    out = tmp_path / "torus.png"
    render_png(state, out)
    width, height = _png_size(out)
    assert 800 <= width <= 4000 and 200 <= height <= 3000
    assert out.stat().st_size > 10_000
