"""A cloud job's card: the hardware section read from its fabric and allocation (``hardware_from_fabric``), and
an exported data point carrying it that the validator accepts."""

from __future__ import annotations

from contextlib import closing
from importlib import resources
from pathlib import Path

import pytest
import yaml

from control_plane.journal import Journal
from control_plane.store import Store
from control_plane.tracing import ClientTimings, TraceRecorder
from policies.placement import RailAlignedPlacement, TorusPlacement
from propius.fabric import Allocation, CloudRequest, FabricError, FabricState, load_fabric
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.torus import RackGrid
from propius.specs import JobSpec
from propius.trace.card import Card
from propius.trace.check import check_data_point
from propius.trace.export import export_job
from propius.trace.format import card_file
from propius.trace.hardware import hardware_from_fabric

SPEC = JobSpec.parse({"name": "cloud-job", "owner": "tests", "rounds": 6, "demand": 2})


def _example() -> FabricState:
    return FabricState(load_fabric(Path(str(resources.files("propius") / "examples" / "fabric-small.yaml"))))


def test_the_example_fabric_gives_a_rail_card() -> None:
    state = _example()  # job "tuning": GPU 1 of both hosts, both on the OCS rail1
    hardware = hardware_from_fabric(state.fabric, state.allocations["tuning"])
    assert hardware.network_topo.topology == "rail-optimized, 1 rails (1 ocs)"
    assert hardware.network_topo.bandwidth_gbps == [400.0, 900.0]  # [scale-out NIC->rail, scale-up NVLink]
    assert (hardware.xpu_spec.total_count, hardware.xpu_spec.count_per_node) == (2, 1)


def test_a_rail_aligned_job_on_a_cluster() -> None:
    state = FabricState(rail_cluster(4, 8, scale_up_gbps=900, rail_gbps=200))
    found = RailAlignedPlacement().place(CloudRequest(count=8, parallel={"tp": 2, "dp": 4}), state)
    assert isinstance(found, Allocation)
    hardware = hardware_from_fabric(state.fabric, found)
    rails = {int(a.rsplit("-a", 1)[1]) for a in found.accelerators}
    hosts = {a.rsplit("-a", 1)[0] for a in found.accelerators}
    assert hardware.network_topo.topology == f"rail-optimized, {len(rails)} rails ({len(rails)} eps)"
    assert hardware.network_topo.bandwidth_gbps == [200.0, 900.0]
    assert hardware.xpu_spec.total_count == 8 and hardware.xpu_spec.count_per_node == 8 // len(hosts)


def test_torus_slices_contiguous_fixed_and_fragmented() -> None:
    fixed = FabricState(torus_racks(1, programmable=False))
    small = TorusPlacement(fragmented=False).place(CloudRequest(count=4, shape=(2, 2, 1)), fixed)
    assert isinstance(small, Allocation)
    hardware = hardware_from_fabric(fixed.fabric, small)
    assert hardware.network_topo.topology == "3D torus 4x4x4 (fixed wiring); 2x2x1 slice"
    assert hardware.network_topo.bandwidth_gbps == [None, 200.0]  # 2 of 6 ports × 100 Gb/s; nothing leaves the rack
    assert (hardware.xpu_spec.total_count, hardware.xpu_spec.count_per_node) == (4, 4)
    # The same ranks without ring shares (e.g. read back from a store): the torus links between members.
    bare = hardware_from_fabric(fixed.fabric, Allocation(small.accelerators))
    assert bare.network_topo.bandwidth_gbps == [None, 200.0]

    state = FabricState(torus_racks(1))
    grid = RackGrid.of(state, "r0")
    for k, host in enumerate(grid.host_at.values()):  # every other server held: no aligned 2x4x4 is free
        if k % 2:
            state.allocate(f"small{k}", Allocation(tuple(grid.host_accelerators(host))))
    frag = TorusPlacement(time_budget_s=0.2).place(CloudRequest(count=32, shape=(2, 4, 4)), state)
    assert isinstance(frag, Allocation) and frag.how.startswith("fragmented")
    hardware = hardware_from_fabric(state.fabric, frag)
    assert hardware.network_topo.topology == "3D torus 4x4x4 (programmable); 32 chips over 8 non-contiguous servers"
    assert hardware.network_topo.bandwidth_gbps == [None, 600.0]  # steered: all six ports
    assert (hardware.xpu_spec.total_count, hardware.xpu_spec.count_per_node) == (32, 4)


def test_an_allocation_off_the_fabric_is_refused() -> None:
    state = _example()
    with pytest.raises(FabricError, match="'nope'"):
        hardware_from_fabric(state.fabric, Allocation(("h0-g0", "nope")))


async def _recorded_job(store: Store) -> None:
    """Six recorded rounds of two clients, through the control plane's own recorder and journal."""
    store.create_job("j1", SPEC.name, "tests", SPEC.to_json(), "0" * 64, 1000.0)
    journal = Journal(store)
    recorder = TraceRecorder(journal, max_rounds=10, max_ranks=8)
    for r in range(6):
        t = 1000.0 + 10 * r
        recorder.round_started("j1", r, 0, t)
        recorder.model_published("j1", r, t, t + 0.1, 1000)
        for k, client in enumerate(("a", "b")):
            timings = ClientTimings(t + 0.2, t + 0.3, t + 0.3, t + 1 + k, t + 1 + k, 0.0, 0.01)
            recorder.update_delivered("j1", r, client, timings, t + 1.1 + k, t + 1.2 + k, t + 1.3 + k, 500, 1000)
        recorder.round_closed("j1", r, 0, t + 3, t + 2.5, 2, 2)
    await journal.flush()


async def test_an_exported_cloud_job_has_the_fabric_hardware_and_passes_the_check(tmp_path: Path) -> None:
    state = _example()
    with closing(Store(f"sqlite:///{tmp_path / 'propius.db'}")) as store:
        await _recorded_job(store)
        with pytest.raises(ValueError, match="both"):
            export_job(store, "j1", tmp_path / "out", fabric=state.fabric)
        folder = export_job(store, "j1", tmp_path / "out", fabric=state.fabric,
                            allocation=state.allocations["tuning"])
        edge = export_job(store, "j1", tmp_path / "edge")
    assert check_data_point(folder) == []
    card = Card.model_validate(yaml.safe_load((folder / card_file(folder.name)).read_text()))
    assert card.workload.hardware == hardware_from_fabric(state.fabric, state.allocations["tuning"])
    assert "hardware_source" in card.collection_notes
    plain = yaml.safe_load((edge / card_file(edge.name)).read_text())
    assert plain["workload"]["hardware"]["network_topo"] == {"topology": "star", "bandwidth_gbps": [None, None]}
