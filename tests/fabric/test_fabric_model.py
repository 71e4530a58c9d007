"""Fabric files: the example loads; bad files are refused whole, with an error naming the element."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from propius.fabric import AcceleratorState, FabricError, FabricState, load_fabric, parse_fabric
from propius.fabric.generators import rail_cluster, torus_racks

EXAMPLE = Path(__file__).resolve().parents[2] / "propius" / "examples" / "fabric-small.yaml"


def example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def test_the_example_loads_with_its_states_and_circuits() -> None:
    state = FabricState(load_fabric(EXAMPLE))
    assert state.state("h1-g0") == AcceleratorState.SPARE
    assert state.allocations["tuning"].accelerators == ("h0-g1", "h1-g1")
    assert state.circuits("rail1") == {0: 1, 1: 0}
    assert state.port_owner("rail1", 0) == "tuning"
    state.check_invariants()


def _edit(path: str, value: Any) -> dict[str, Any]:
    data = example()
    node: Any = data
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "element", "says"),
    [
        ("accelerators.0.host", "h9", "accelerator 'h0-g0'", "host 'h9' is not defined"),
        ("accelerators.2.index", 1, "accelerator 'h1-g1'", "local index 1 is already used on host 'h1'"),
        ("accelerators.0.state", "allocated", "accelerator 'h0-g0'", "'job' is set exactly when"),
        ("accelerators.0.state", "broken", "accelerator 'h0-g0' field 'state'", "Input should be"),
        ("hosts.1.rack", "rack2", "host 'h1'", "rack 'rack2' is not defined"),
        ("links.0.b", "h1-g0", "scale-up link h0-g0->h1-g0", "one scale-up domain"),
        ("links.2.b", "rail7", "nic-rail link h0-g0->rail7", "endpoint 'rail7' is not defined"),
        ("rails.1.circuits", {0: 1, 1: 1}, "rail 'rail1'", "a port receives twice"),
        ("rails.1.circuits", {0: 5}, "rail 'rail1'", "port 5 has no accelerator"),
        ("rails.1.ports", {0: "h0-g0", 1: "h1-g1"}, "rail 'rail1'", "belongs to rail index 0"),
        ("rails.1.ports", {9: "h0-g1", 1: "h1-g1"}, "rail 'rail1'", "port 9 is outside radix 8"),
        ("rails.0.circuits", {0: 1}, "rail 'rail0'", "an EPS rail has no OCS"),
        ("rails.1.index", 0, "rail 'rail0'", "rail index 0 is used by another rail"),
        ("accelerators.3.job", "other", "rail 'rail1'", "not held by one job"),
        ("sites.0.wan_gbps", -1, "site 'dc1' field 'wan_gbps'", "greater than 0"),
    ],
)
def test_a_bad_file_names_the_element(path: str, value: Any, element: str, says: str, tmp_path: Path) -> None:
    bad = tmp_path / "fabric.yaml"
    bad.write_text(yaml.safe_dump(_edit(path, value)))
    with pytest.raises(FabricError) as caught:
        load_fabric(bad)
    assert caught.value.element == element
    assert says in caught.value.message


def test_torus_links_must_match_coordinates_and_wrap() -> None:
    data = torus_racks(1, 4, 1, 1, brick=(2, 1, 1)).model_dump(mode="json")
    assert parse_fabric(data)
    wrap = next(link for link in data["links"] if link["wrap"])
    wrap["wrap"] = False
    with pytest.raises(FabricError, match=r"torus link r0-h1-a1->r0-h0-a0: \+x from \(3, 0, 0\).*wrap=True"):
        parse_fabric(data)


def test_interposer_fibres_must_agree_both_ways() -> None:
    data = torus_racks(1, 4, 2, 1, brick=(2, 2, 1)).model_dump(mode="json")
    data["hosts"][0]["interposer"]["fibres"]["r0-h1"] = 3
    with pytest.raises(FabricError) as caught:
        parse_fabric(data)
    assert caught.value.element == "host 'r0-h0'" and "lists a different count back" in caught.value.message


def test_yaml_that_is_not_a_mapping_or_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("- just\n- a list\n")
    (tmp_path / "b.yaml").write_text("sites: [\n")
    with pytest.raises(FabricError, match="a fabric file is a mapping"):
        load_fabric(tmp_path / "a.yaml")
    with pytest.raises(FabricError, match="not valid YAML"):
        load_fabric(tmp_path / "b.yaml")


def test_generators_build_valid_fabrics() -> None:
    torus = torus_racks(2)
    assert len(torus.accelerators) == 128 and len(torus.hosts) == 32
    assert sum(link.wrap for link in torus.links) == 2 * 3 * 16  # one wrap link per ring
    assert all(len(h.interposer.fibres) == 4 for h in torus.hosts if h.interposer)  # ±z, one x and one y
    rails = rail_cluster(4, 8, rail_kind="ocs")
    assert len(rails.rails) == 8 and rails.rails[3].ports == {h: f"r0-h{h}-a3" for h in range(4)}
    assert parse_fabric(rails.model_dump(mode="json")) == rails
