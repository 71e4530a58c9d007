"""Each placement plug-in on small fabrics whose right answer is derived by hand; impossible requests."""

from __future__ import annotations

import pickle
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from policies.placement import (
    FirstFitPlacement,
    RailAlignedPlacement,
    TorusPlacement,
    UnknownPlacementError,
    Unplaceable,
    available_placements,
    load_placement,
)
from policies.registry import PolicyOptionError
from propius.fabric import Allocation, CloudRequest, FabricState, FibreCircuit
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.torus import RackGrid
from propius.fabric.traffic import traffic_split

ROOT = Path(__file__).resolve().parents[2]


def hold(state: FabricState, job: str, *accs: str) -> None:
    state.allocate(job, Allocation(accs))


def test_first_fit_takes_the_first_free_in_fabric_order() -> None:
    state = FabricState(rail_cluster(2, 4))
    hold(state, "x", "r0-h0-a0", "r0-h0-a2")
    found = FirstFitPlacement().place(CloudRequest(count=3), state)
    assert isinstance(found, Allocation) and found.accelerators == ("r0-h0-a1", "r0-h0-a3", "r0-h1-a0")
    assert FirstFitPlacement().place(CloudRequest(count=7), state) == Unplaceable("7 accelerators requested, 6 free")


def test_rail_aligned_uses_the_same_indices_on_every_host_and_keeps_tp_in_the_domain() -> None:
    # 3 hosts x 4 GPUs, OCS rails. Host 0 has GPU 0 taken, so for 2 hosts x {0, 1} only hosts 1, 2 qualify.
    state = FabricState(rail_cluster(3, 4, rail_kind="ocs"))
    hold(state, "x", "r0-h0-a0")
    request = CloudRequest(count=4, parallel={"tp": 2, "dp": 2})
    found = RailAlignedPlacement().place(request, state)
    # k=4 on one host (0 cross-host rails) beats k=2 on two hosts: host 1, indices 0..3.
    assert isinstance(found, Allocation) and found.accelerators == ("r0-h1-a0", "r0-h1-a1", "r0-h1-a2", "r0-h1-a3")
    assert found.ocs == ()
    hold(state, "y", "r0-h1-a3", "r0-h2-a3")
    found = RailAlignedPlacement().place(request, state)
    # No host has 4 free now: two hosts with indices {0, 1} free -> hosts 1 and 2, TP pairs (0, 1) on each.
    assert isinstance(found, Allocation) and found.accelerators == ("r0-h1-a0", "r0-h1-a1", "r0-h2-a0", "r0-h2-a1")
    # Rails 0 and 1 each get a two-port ring over hosts 1 and 2 (ports = host numbers), nothing else.
    assert sorted((c.rail, c.tx, c.rx) for c in found.ocs) == [("rail0", 1, 2), ("rail0", 2, 1),
                                                               ("rail1", 1, 2), ("rail1", 2, 1)]
    split = traffic_split(state, found.accelerators, request.degrees, {"tp": 1.0, "dp": 1.0})
    assert split.cross_rail == 0 and split.tp_off_scale_up == 0 and split.same_rail == 4.0  # 2 groups x 2 x 1
    state.allocate("z", found)
    assert state.port_owner("rail3", 1) is None  # job y's GPUs 3 were not wired
    state.check_invariants()


def test_first_fit_crosses_rails_where_rail_aligned_does_not() -> None:
    state = FabricState(rail_cluster(2, 4))
    hold(state, "x", "r0-h0-a0")
    request = CloudRequest(count=4)
    bytes_ = {"dp": 1.0}
    first = FirstFitPlacement().place(request, state)
    aligned = RailAlignedPlacement().place(request, state)
    assert isinstance(first, Allocation) and isinstance(aligned, Allocation)
    # first-fit: GPUs 1, 2, 3 of host 0 and GPU 0 of host 1: indices {1,2,3} vs {0} share no rail.
    assert traffic_split(state, first.accelerators, request.degrees, bytes_).cross_rail == 4 * 2 * 3 / 4
    assert aligned.accelerators == ("r0-h1-a0", "r0-h1-a1", "r0-h1-a2", "r0-h1-a3")
    assert traffic_split(state, aligned.accelerators, request.degrees, bytes_).cross_rail == 0


def test_rail_aligned_refuses_tp_beyond_a_domain() -> None:
    found = RailAlignedPlacement().place(CloudRequest(count=8, parallel={"tp": 8}), FabricState(rail_cluster(2, 4)))
    assert isinstance(found, Unplaceable) and "TP=8 inside a scale-up domain" in found.reason


def test_torus_contiguous_first_fit_at_aligned_origins() -> None:
    state = FabricState(torus_racks(1, 4, 4, 2))
    first = TorusPlacement().place(CloudRequest(count=4), state)
    # 2x2x1 at origin (0,0,0): host r0-h0 holds x,y in {0,1}, z=0.
    assert isinstance(first, Allocation) and first.accelerators == ("r0-h0-a0", "r0-h0-a1", "r0-h0-a2", "r0-h0-a3")
    assert first.how == "contiguous 2x2x1 at (0, 0, 0) in r0"
    assert [(r.name, r.links) for r in first.rings] == [("x", 3.0), ("y", 3.0)]  # steered: 3x the 1+1 fixed
    state.allocate("a", first)
    second = TorusPlacement().place(CloudRequest(count=4), state)
    assert isinstance(second, Allocation) and second.how == "contiguous 2x2x1 at (0, 0, 1) in r0"


def test_fixed_wiring_keeps_only_in_slice_ports() -> None:
    state = FabricState(torus_racks(1, 4, 4, 4, programmable=False))
    found = TorusPlacement().place(CloudRequest(count=4), state)
    assert isinstance(found, Allocation) and [r.links for r in found.rings] == [1.0, 1.0] and found.fibre == ()
    whole = TorusPlacement().place(CloudRequest(count=64), state)
    assert isinstance(whole, Allocation) and [r.links for r in whole.rings] == [2.0, 2.0, 2.0]


def test_torus_fragmented_when_no_block_is_free() -> None:
    # 4x4x2 rack = 8 servers (2x2x2 grid). Hold the servers at z=0 of cells (0,0) and (1,1) and z=1 of (0,1),
    # (1,0): no aligned 2x2x2 (8) block is free (each x,y column of servers has one taken).
    state = FabricState(torus_racks(1, 4, 4, 2))
    for job, host in (("a", "r0-h0"), ("b", "r0-h6"), ("c", "r0-h3"), ("d", "r0-h5")):
        hold(state, job, *(f"{host}-a{i}" for i in range(4)))
    request = CloudRequest(count=8, shape=(2, 2, 2))
    assert isinstance(TorusPlacement(fragmented=False).place(request, state), Unplaceable)
    found = TorusPlacement(time_budget_s=2).place(request, state)
    assert isinstance(found, Allocation) and found.how.startswith("fragmented 2x2x2 over 2 servers")
    # The two slots are two free servers; their one adjacency (z, a ring of two: width 8) is one path.
    hosts = {a.rsplit("-", 1)[0] for a in found.accelerators}
    assert len(hosts) == 2 and hosts <= {"r0-h1", "r0-h2", "r0-h4", "r0-h7"}
    assert len(found.fibre) == 1 and found.fibre[0].width == 8
    state.allocate("e", found)
    state.check_invariants()
    assert max(state.edge_loads().values()) <= 8


def test_impossible_requests_say_why() -> None:
    state = FabricState(torus_racks(1, 4, 4, 2))
    assert TorusPlacement().place(CloudRequest(count=3), state) == Unplaceable(
        "no standard torus shape holds 3 accelerators; give 'shape'")
    big = TorusPlacement().place(CloudRequest(count=64), state)
    assert isinstance(big, Unplaceable) and "no aligned free 4x4x4 block" in big.reason
    assert isinstance(TorusPlacement().place(CloudRequest(count=4), FabricState(rail_cluster(1, 4))), Unplaceable)
    with pytest.raises(ValidationError, match="shape 2x2x2 holds 8 accelerators, not 4"):
        CloudRequest(count=4, shape=(2, 2, 2))
    with pytest.raises(ValidationError, match="tp=2 x dp=3 x pp=1 = 6, not 4"):
        CloudRequest(count=4, parallel={"tp": 2, "dp": 3})
    with pytest.raises(ValidationError, match="exactly one of 'count'"):
        CloudRequest(count=4, shards=4)
    assert CloudRequest(shards=3).degrees.groups() == {"tp": [], "dp": [[0, 1, 2]], "pp": []}


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """This checkout's ``propius.placement`` entry points, as pip installs them from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    group = project["project"]["entry-points"]["propius.placement"]
    dist = tmp_path / "propius_placement_under_test-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: propius-placement-under-test\nVersion: 0\n")
    lines = "\n".join(f"{name} = {target}" for name, target in group.items())
    (dist / "entry_points.txt").write_text(f"[propius.placement]\n{lines}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    available_placements.cache_clear()
    yield group
    available_placements.cache_clear()
    assert "propius_placement_under_test" not in sys.modules


def test_the_plugins_are_found_through_their_entry_points(installed: dict[str, str]) -> None:
    found = available_placements()
    assert {"first-fit": FirstFitPlacement, "rail-aligned": RailAlignedPlacement, "torus": TorusPlacement}.items() \
        <= found.items()
    assert all(cls.name == name for name, cls in found.items() if name in installed)
    torus = load_placement("torus", fragmented="false", time_budget_s="0.5")
    assert isinstance(torus, TorusPlacement) and torus.fragmented is False and torus.time_budget_s == 0.5
    with pytest.raises(PolicyOptionError, match="time_budget"):
        load_placement("torus", time_budget=1)
    with pytest.raises(UnknownPlacementError, match="unknown placement 'best'; installed: .*first-fit") as caught:
        load_placement("best")
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)  # crosses a worker pool whole


def test_a_rack_grid_is_built_once_per_fabric_object() -> None:
    state = FabricState(torus_racks(2))
    grid = RackGrid.of(state, "r1")
    assert RackGrid.of(FabricState(state.fabric), "r1") is grid  # same fabric object, another state: cached
    other = RackGrid.of(FabricState(torus_racks(2, 4, 4, 2)), "r1")  # another fabric: its own grid
    assert other is not grid and other.dims == (4, 4, 2) and grid.dims == (4, 4, 4)


def test_a_free_block_crossed_by_another_slices_light_path_is_skipped() -> None:
    # 4x4x2 rack of 2x2x1 servers, 8 fibres per edge. A 2x2x2 at origin (0,0,0) is servers h0 and h1, joined
    # by a two-server z-ring of width 8. Job "t" (on h2) has a light path between h0 and h1 using one fibre:
    # the block is free but its ring no longer fits, so the next aligned block is taken.
    state = FabricState(torus_racks(1, 4, 4, 2))
    grid = RackGrid.of(state, "r0")
    transit = FibreCircuit(("r0-h0", "r0-h1"), 1)
    state.allocate("t", Allocation(tuple(grid.host_accelerators("r0-h2")), fibre=(transit,)))
    found = TorusPlacement(fragmented=False).place(CloudRequest(count=8, shape=(2, 2, 2)), state)
    assert isinstance(found, Allocation)
    assert not {state.accelerators[a].host for a in found.accelerators} & {"r0-h0", "r0-h1", "r0-h2"}
    state.allocate("slice", found)
    state.check_invariants()
