"""The fabric model: sites, racks, hosts, accelerators, typed links, rails and interposers, read from YAML.

A fabric file describes what the datacentre *is* (and, optionally, which accelerators are spares,
failed or held by a job, and which OCS circuits are up). It is validated whole before anything uses it:
every reference must name a defined element, and every error names the element at fault
(``accelerator 'r0-h1-g2': host 'r0-h9' is not defined``), so an operator can fix the file. A
:class:`Fabric` is immutable; what changes at run time (who holds what, circuits, fibre loads) lives in
:class:`propius.fabric.state.FabricState`, built from a validated fabric.

Conventions:

- An accelerator's ``index`` is its local index on its host, and also its rail: NIC ``i`` of every
  host attaches to rail ``i`` (the rail-optimized layout).
- ``coord`` places an accelerator in its rack's torus (``rack.torus`` gives the dimensions). A torus
  link names its direction (``+x`` .. ``-z``); ``wrap`` marks the link that closes a full dimension.
- An OCS rail owns ports ``0..radix-1``; ``ports`` maps a port to the accelerator whose NIC is
  plugged into it, and ``circuits`` maps a sending port to a receiving port (a partial permutation:
  no port sends or receives twice).
- A host's ``interposer`` (the programmable photonic layer under a server) gives the number of fibres
  to each neighbouring host of the same rack; circuits routed through it may load an edge up to that
  count (enforced by the state object).
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "Accelerator",
    "AcceleratorState",
    "Fabric",
    "FabricError",
    "Host",
    "Interposer",
    "Link",
    "Rack",
    "Rail",
    "SharedRisk",
    "Site",
    "load_fabric",
    "parse_fabric",
]

Coord = tuple[int, int, int]
AXES = "xyz"


class FabricError(ValueError):
    """A fabric (or a request against it) is invalid; ``element`` names the element at fault."""

    def __init__(self, element: str, message: str) -> None:
        super().__init__(f"{element}: {message}")
        self.element = element
        self.message = message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]


class AcceleratorState(StrEnum):
    FREE = "free"
    ALLOCATED = "allocated"
    SPARE = "spare"
    FAILED = "failed"


class Site(_Strict):
    """A datacentre or region; edge clients reach its accelerators over its WAN attachment."""

    id: str
    wan_gbps: Positive = 100.0
    wan_latency_us: NonNegative = 20_000.0


class Rack(_Strict):
    """A rack; ``torus`` gives its torus dimensions when its accelerators form one, ``programmable`` says
    whether its hosts' interposers can steer circuits (a Morphlux/LUMION rack) or are fixed wiring."""

    id: str
    site: str
    torus: Coord | None = None
    programmable: bool = False


class SharedRisk(_Strict):
    """The shared-risk groups a host belongs to: one failure of any takes the whole host down."""

    power: str
    board: str
    tor: str


class Interposer(_Strict):
    """Fibres from this host to each neighbouring host of its rack (host id -> count)."""

    fibres: dict[str, Annotated[int, Field(ge=1)]]


class Host(_Strict):
    id: str
    rack: str
    srg: SharedRisk
    interposer: Interposer | None = None


class Accelerator(_Strict):
    """One accelerator: ``index`` is its local index (= rail), ``domain`` its scale-up domain
    (NVLink island or torus), ``state`` one of free/allocated/spare/failed (``job`` iff allocated)."""

    id: str
    host: str
    index: Annotated[int, Field(ge=0)]
    domain: str
    coord: Coord | None = None
    state: AcceleratorState = AcceleratorState.FREE
    job: str | None = None

    @model_validator(mode="after")
    def _job_iff_allocated(self) -> Accelerator:
        if (self.state == AcceleratorState.ALLOCATED) != (self.job is not None):
            raise FabricError(f"accelerator {self.id!r}", "'job' is set exactly when state is 'allocated'")
        return self


LinkKind = Literal["scale-up", "torus", "nic-rail", "wan"]
Direction = Literal["+x", "-x", "+y", "-y", "+z", "-z"]


class Link(_Strict):
    """A typed link. ``a``/``b``: accelerators (scale-up, torus), accelerator -> rail (nic-rail), or
    site -> site (wan). Torus links name their ``direction`` from ``a`` to ``b`` and ``wrap``."""

    kind: LinkKind
    a: str
    b: str
    bandwidth_gbps: Positive
    latency_us: NonNegative = 1.0
    direction: Direction | None = None
    wrap: bool = False

    @property
    def name(self) -> str:
        return f"{self.kind} link {self.a}->{self.b}"


class Rail(_Strict):
    """Rail ``index``: EPS (a packet-switched fabric, any-to-any) or OCS (one-to-one circuits)."""

    id: str
    index: Annotated[int, Field(ge=0)]
    kind: Literal["eps", "ocs"]
    bandwidth_gbps: Positive = 400.0
    radix: Annotated[int, Field(ge=1)] | None = None
    ports: dict[int, str] = Field(default_factory=dict)
    circuits: dict[int, int] = Field(default_factory=dict)


class Fabric(_Strict):
    """A whole fabric, validated as one: see the module docstring for the conventions."""

    sites: list[Site]
    racks: list[Rack]
    hosts: list[Host]
    accelerators: list[Accelerator]
    links: list[Link] = Field(default_factory=list)
    rails: list[Rail] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Fabric:
        for kind, items in (("site", self.sites), ("rack", self.racks), ("host", self.hosts),
                            ("accelerator", self.accelerators), ("rail", self.rails)):
            dup = [key for key, n in Counter(item.id for item in items).items() if n > 1]
            if dup:
                raise FabricError(f"{kind} {dup[0]!r}", "defined more than once")
        sites = {s.id for s in self.sites}
        racks = {r.id: r for r in self.racks}
        hosts = {h.id: h for h in self.hosts}
        accs = {a.id: a for a in self.accelerators}
        for rack in self.racks:
            if rack.site not in sites:
                raise FabricError(f"rack {rack.id!r}", f"site {rack.site!r} is not defined")
            if rack.torus is not None and min(rack.torus) < 1:
                raise FabricError(f"rack {rack.id!r}", f"torus dimensions must be >= 1, got {rack.torus}")
        for host in self.hosts:
            if host.rack not in racks:
                raise FabricError(f"host {host.id!r}", f"rack {host.rack!r} is not defined")
        self._check_accelerators(racks, hosts)
        self._check_interposers(hosts)
        self._check_links(accs, sites, {r.id for r in self.rails})
        self._check_rails(accs)
        return self

    def _check_accelerators(self, racks: dict[str, Rack], hosts: dict[str, Host]) -> None:
        seen_index: set[tuple[str, int]] = set()
        seen_coord: set[tuple[str, Coord]] = set()
        for acc in self.accelerators:
            name = f"accelerator {acc.id!r}"
            if acc.host not in hosts:
                raise FabricError(name, f"host {acc.host!r} is not defined")
            if (acc.host, acc.index) in seen_index:
                raise FabricError(name, f"local index {acc.index} is already used on host {acc.host!r}")
            seen_index.add((acc.host, acc.index))
            rack = racks[hosts[acc.host].rack]
            if (acc.coord is None) != (rack.torus is None):
                raise FabricError(name, f"'coord' is required exactly when rack {rack.id!r} has a torus")
            if acc.coord is not None and rack.torus is not None:
                if any(not 0 <= c < d for c, d in zip(acc.coord, rack.torus, strict=True)):
                    raise FabricError(name, f"coord {acc.coord} is outside rack {rack.id!r}'s torus {rack.torus}")
                if (rack.id, acc.coord) in seen_coord:
                    raise FabricError(name, f"coord {acc.coord} is already taken in rack {rack.id!r}")
                seen_coord.add((rack.id, acc.coord))

    def _check_interposers(self, hosts: dict[str, Host]) -> None:
        for host in self.hosts:
            if host.interposer is None:
                continue
            for other, count in host.interposer.fibres.items():
                name = f"host {host.id!r}"
                if other not in hosts:
                    raise FabricError(name, f"interposer neighbour {other!r} is not defined")
                if other == host.id or hosts[other].rack != host.rack:
                    raise FabricError(
                        name, f"interposer neighbour {other!r} must be another host of rack {host.rack!r}"
                    )
                back = hosts[other].interposer
                if back is None or back.fibres.get(host.id) != count:
                    raise FabricError(name, f"{count} fibres to {other!r}, but {other!r} lists a different count back")

    def _check_links(self, accs: dict[str, Accelerator], sites: set[str], rails: set[str]) -> None:
        racks = {r.id: r for r in self.racks}
        rack_of = {h.id: h.rack for h in self.hosts}
        for link in self.links:
            ends = {"scale-up": (accs, accs), "torus": (accs, accs), "nic-rail": (accs, rails), "wan": (sites, sites)}
            known_a, known_b = ends[link.kind]
            for end, known in ((link.a, known_a), (link.b, known_b)):
                if end not in known:
                    raise FabricError(link.name, f"endpoint {end!r} is not defined")
            if link.kind == "scale-up" and accs[link.a].domain != accs[link.b].domain:
                raise FabricError(link.name, "scale-up links join accelerators of one scale-up domain")
            if link.kind != "torus":
                if link.direction is not None or link.wrap:
                    raise FabricError(link.name, "only torus links have a direction or wrap")
                continue
            a, b = accs[link.a], accs[link.b]
            rack = racks[rack_of[a.host]]
            if rack_of[b.host] != rack.id or link.direction is None or rack.torus is None:
                raise FabricError(link.name, "a torus link has a direction and joins accelerators of one torus rack")
            assert a.coord is not None and b.coord is not None
            axis, step = AXES.index(link.direction[1]), (1 if link.direction[0] == "+" else -1)
            size = rack.torus[axis]
            expected = list(a.coord)
            expected[axis] = (a.coord[axis] + step) % size
            wraps = not 0 <= a.coord[axis] + step < size
            if tuple(expected) != b.coord or wraps != link.wrap:
                raise FabricError(link.name, f"{link.direction} from {a.coord} in a {rack.torus} torus reaches "
                                             f"{tuple(expected)} (wrap={wraps}), not {b.coord} (wrap={link.wrap})")

    def _check_rails(self, accs: dict[str, Accelerator]) -> None:
        indices = Counter(r.index for r in self.rails)
        for rail in self.rails:
            name = f"rail {rail.id!r}"
            if indices[rail.index] > 1:
                raise FabricError(name, f"rail index {rail.index} is used by another rail")
            if rail.kind == "eps":
                if rail.ports or rail.circuits or rail.radix is not None:
                    raise FabricError(name, "an EPS rail has no OCS radix, ports or circuits")
                continue
            if rail.radix is None:
                raise FabricError(name, "an OCS rail needs a radix")
            for port, acc_id in rail.ports.items():
                if not 0 <= port < rail.radix:
                    raise FabricError(name, f"port {port} is outside radix {rail.radix}")
                if acc_id not in accs:
                    raise FabricError(name, f"port {port}: accelerator {acc_id!r} is not defined")
                if accs[acc_id].index != rail.index:
                    raise FabricError(name, f"port {port}: accelerator {acc_id!r} has local index "
                                            f"{accs[acc_id].index}, so it belongs to rail index {accs[acc_id].index}")
            if len(set(rail.ports.values())) != len(rail.ports):
                raise FabricError(name, "an accelerator is plugged into two ports")
            if len(set(rail.circuits.values())) != len(rail.circuits):
                raise FabricError(name, "circuits are not a partial permutation: a port receives twice")
            for tx, rx in rail.circuits.items():
                for port in (tx, rx):
                    if port not in rail.ports:
                        raise FabricError(name, f"circuit {tx}->{rx}: port {port} has no accelerator")
                jobs = {accs[rail.ports[tx]].job, accs[rail.ports[rx]].job}
                if len(jobs) != 1 or None in jobs:
                    raise FabricError(name, f"circuit {tx}->{rx} joins ports not held by one job")


def _element_of(error: ValidationError, data: Any) -> FabricError:
    """The first pydantic error as a FabricError naming the element (by its id where it has one)."""
    first = error.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FabricError):
        return cause
    loc = list(first["loc"])
    element = ".".join(str(part) for part in loc) or "<fabric>"
    if len(loc) >= 2 and isinstance(loc[1], int) and isinstance(data, dict):
        items = data.get(str(loc[0]))
        item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        if isinstance(item, dict) and "id" in item:
            kind = str(loc[0]).rstrip("s")
            rest = ".".join(str(part) for part in loc[2:])
            element = f"{kind} {item['id']!r}" + (f" field {rest!r}" if rest else "")
    return FabricError(element, first["msg"])


def parse_fabric(data: Any) -> Fabric:
    """Validate a parsed fabric document; raises FabricError naming the first bad element."""
    if not isinstance(data, dict):
        raise FabricError("<fabric>", "a fabric file is a mapping with sites, racks, hosts and accelerators")
    try:
        return Fabric.model_validate(data)
    except ValidationError as error:
        raise _element_of(error, data) from None


def load_fabric(path: str | Path) -> Fabric:
    """Read and validate a fabric YAML file (all of it, or nothing: errors raise FabricError)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise FabricError(str(path), f"not valid YAML: {error}") from None
    return parse_fabric(data)
