"""``propius fabric``: load the cloud fabric into the control plane, show it, fail and repair accelerators.

The commands call the control plane's FabricService (the ``admin`` role changes the fabric, ``read`` shows
it, when it runs with ``--auth keys``). ``show`` rebuilds the fabric's state from the reply
(:func:`propius.fabric.snapshot.restore`) and draws it with :func:`fabric_tables`, kept apart from the
command so other renderings can take the same state.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import grpc
import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from propius.auth_cli import with_api_key
from propius.channels import sync_channel
from propius.config import ChannelSecurity
from propius.fabric.model import AcceleratorState, FabricError, load_fabric, parse_fabric
from propius.fabric.plot import render_png
from propius.fabric.snapshot import FabricSnapshot, restore
from propius.fabric.state import FabricState
from propius.fabric_bench_cli import aggregate_bench
from propius.fabric_plan_cli import plan_command
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.tls_cli import tls_options

__all__ = ["fabric_app", "fabric_tables", "shown_state"]

console = Console()
fabric_app = typer.Typer(help="The cloud fabric: racks, rails, accelerators and who holds them (docs/fabric.md).",
                         no_args_is_help=True)
Server = Annotated[str, typer.Option(help="control-plane address host:port")]
DEFAULT_SERVER = "127.0.0.1:50051"
_TIMEOUT_S = 30.0
# recovery-time components in the order they happen (a map on the wire has none)
_TIMELINE = ("detect", "program", "restart", "migrate_restore", "comm_init", "first_step", "repair", "lost_work")
_STYLE = {AcceleratorState.FREE: "green", AcceleratorState.ALLOCATED: "cyan", AcceleratorState.SPARE: "yellow",
          AcceleratorState.FAILED: "red"}


def _stub(server: str, security: ChannelSecurity) -> tuple[grpc.Channel, pb_grpc.FabricServiceStub]:
    channel = sync_channel(server, security)
    return channel, pb_grpc.FabricServiceStub(with_api_key(channel))


def _print_change(reply: pb.FabricChange) -> None:
    console.print(f"fabric version {reply.version}")
    if reply.placed_jobs:
        console.print(f"placed from the queue: {', '.join(reply.placed_jobs)}")


@fabric_app.command("load")
@tls_options
def fabric_load(file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="a fabric YAML file")],
                server: Server = DEFAULT_SERVER, *, security: ChannelSecurity) -> None:
    """Load a fabric file into the control plane (validated here first, then there)."""
    try:
        fabric = load_fabric(file)
    except FabricError as error:
        raise typer.BadParameter(str(error), param_hint="FILE") from None
    channel, stub = _stub(server, security)
    with channel:
        reply = stub.LoadFabric(pb.LoadFabricRequest(fabric_json=fabric.model_dump_json(exclude_defaults=True)),
                                timeout=_TIMEOUT_S)
    console.print(f"loaded {file}: {len(fabric.racks)} racks, {len(fabric.hosts)} hosts, "
                  f"{len(fabric.accelerators)} accelerators, {len(fabric.rails)} rails")
    _print_change(reply)


def shown_state(info: pb.FabricInfo) -> FabricState:
    """The fabric state a GetFabric reply describes, rebuilt exactly as the control plane holds it."""
    fabric = parse_fabric(json.loads(info.fabric_json))
    return restore(fabric, FabricSnapshot.model_validate_json(info.state_json))


def fabric_tables(state: FabricState, waiting: list[pb.JobPlacement]) -> Group:
    """The fabric for a terminal: per host its accelerators by state and holding job, per rail its circuits,
    the jobs' placements and what waits."""
    hosts = Table("rack", "host", "accelerators (index: id, state, job)", title="accelerators")
    by_host: dict[str, list[str]] = defaultdict(list)
    for acc in state.fabric.accelerators:
        acc_state = state.state(acc.id)
        job = state.job_of(acc.id)
        by_host[acc.host].append(f"{acc.index}: {escape(acc.id)} [{_STYLE[acc_state]}]{acc_state}[/]"
                                 + (f" [bold]{escape(job)}[/]" if job else ""))
    for host in state.fabric.hosts:
        rack = state.racks[host.rack]
        rack_label = host.rack + (" (programmable)" if rack.programmable else "") + (
            f" torus {'x'.join(map(str, rack.torus))}" if rack.torus else "")
        hosts.add_row(escape(rack_label), escape(host.id), "\n".join(by_host[host.id]))
    counts = Table("free", "allocated", "spare", "failed", title="by state")
    counts.add_row(*(str(len(state.in_state(s))) for s in (AcceleratorState.FREE, AcceleratorState.ALLOCATED,
                                                            AcceleratorState.SPARE, AcceleratorState.FAILED)))
    rails = Table("rail", "index", "kind", "Gb/s", "circuits (port -> port: job)", title="rails")
    for rail in state.fabric.rails:
        circuits = [f"{tx}->{rx}: {escape(state.port_owner(rail.id, tx) or '?')}"
                    for tx, rx in sorted(state.circuits(rail.id).items())]
        rails.add_row(escape(rail.id), str(rail.index), rail.kind, f"{rail.bandwidth_gbps:g}",
                      ", ".join(circuits) or "-")
    jobs = Table("job", "accelerators (rank order)", "racks", "how", title="placements")
    for job, allocation in sorted(state.allocations.items()):
        jobs.add_row(escape(job), escape(" ".join(allocation.accelerators)),
                     escape(", ".join(sorted({state.rack_of(a) for a in allocation.accelerators}))),
                     escape(allocation.how))
    parts: list[Table] = [hosts, counts, rails, jobs]
    if waiting:
        queue = Table("job", "accelerators", "waiting because", title="waiting")
        for entry in waiting:
            queue.add_row(escape(entry.job_id), str(entry.requested), escape(entry.waiting_reason))
        parts.append(queue)
    return Group(*parts)


@fabric_app.command("show")
@tls_options
def fabric_show(server: Server = DEFAULT_SERVER,
                png: Annotated[Path | None, typer.Option(dir_okay=False, help="also draw the fabric into this PNG "
                                                         "file (needs matplotlib: the sim or dev extra)")] = None,
                *, security: ChannelSecurity) -> None:
    """Racks, hosts and accelerators by state and holding job, rails with their circuits, what waits."""
    channel, stub = _stub(server, security)
    with channel:
        info = stub.GetFabric(pb.GetFabricRequest(), timeout=_TIMEOUT_S)
    if info.version == 0:
        console.print("no fabric loaded (`propius fabric load FILE`)")
        return
    console.print(f"fabric version {info.version}, placement {info.placement}")
    state = shown_state(info)
    console.print(fabric_tables(state, list(info.waiting)))
    if png is not None:
        render_png(state, png)
        console.print(f"drawn into {png}")


@fabric_app.command("fail")
@tls_options
def fabric_fail(accelerator: Annotated[str, typer.Argument(help="the failed accelerator's id")],
                server: Server = DEFAULT_SERVER, *, security: ChannelSecurity) -> None:
    """Mark an accelerator failed; its job is recovered (swap onto a spare, migration or the queue)."""
    channel, stub = _stub(server, security)
    with channel:
        reply = stub.FailAccelerator(pb.AcceleratorRequest(accelerator=accelerator), timeout=_TIMEOUT_S)
    recovery = reply.recovery
    held = f"job {recovery.job_id}" if recovery.job_id else "no job"
    console.print(f"{accelerator} failed ({held}): {recovery.kind}"
                  + (f" onto {recovery.spare}" if recovery.spare else ""))
    if recovery.components:
        names = sorted(recovery.components, key=lambda name: (_TIMELINE.index(name) if name in _TIMELINE else 99, name))
        parts = ", ".join(f"{name} {recovery.components[name]:g} s" for name in names)
        console.print(f"recovery {recovery.time_s:g} s = {parts}; throughput after: {recovery.throughput:.0%}")
    _print_change(reply)


@fabric_app.command("repair")
@tls_options
def fabric_repair(accelerator: Annotated[str, typer.Argument(help="the repaired accelerator's id")],
                  spare: Annotated[bool, typer.Option("--spare", help="return it as a spare, not free")] = False,
                  server: Server = DEFAULT_SERVER, *, security: ChannelSecurity) -> None:
    """A failed accelerator is back (free, or a spare); waiting jobs may be placed on it."""
    channel, stub = _stub(server, security)
    with channel:
        reply = stub.RepairAccelerator(pb.AcceleratorRequest(accelerator=accelerator, spare=spare),
                                       timeout=_TIMEOUT_S)
    console.print(f"{accelerator} repaired ({'spare' if spare else 'free'})")
    _print_change(reply)

fabric_app.command("plan")(plan_command)
fabric_app.command("aggregate-bench")(aggregate_bench)
