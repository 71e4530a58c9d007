"""FabricService: the operator's gRPC API over the cloud fabric (load, show, fail, repair).

Changing the fabric takes the ``admin`` role and reading it the ``read`` role when auth is on (open mode
allows all). A fabric arrives as JSON (the CLI reads the YAML file), at most 16 MiB, and is validated
whole before anything is written: a bad one is INVALID_ARGUMENT naming the element at fault.
"""

from __future__ import annotations

import json

import grpc

from control_plane.audit import AuditLog
from control_plane.auth import Guard
from control_plane.convert import fabric_recovery, job_placement
from control_plane.errors import InvalidArgument, require_id, rpc_errors
from control_plane.fabric_manager import MAX_FABRIC_BYTES, FabricManager, Outcome, recovery_detail
from control_plane.jobs import JobRegistry
from propius.fabric.model import FabricError, parse_fabric
from propius.fabric.snapshot import snapshot
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["FabricService"]


def _change(outcome: Outcome) -> pb.FabricChange:
    reply = pb.FabricChange(version=outcome.version, placed_jobs=list(outcome.placed))
    if outcome.recovery is not None:
        reply.recovery.CopyFrom(fabric_recovery(outcome.recovery.job or "",
                                                recovery_detail(outcome.failed, outcome.recovery)))
    return reply


class FabricService(pb_grpc.FabricServiceServicer):
    def __init__(self, fabric: FabricManager, *, guard: Guard, audit: AuditLog, jobs: JobRegistry) -> None:
        """``jobs``: refreshed before a failure is recovered, so a job another shard registered is recovered
        with its own cloud request (its parallel degrees), not as a plain count of accelerators."""
        self._fabric = fabric
        self._jobs = jobs
        self._guard = guard
        self._audit = audit

    @rpc_errors
    async def LoadFabric(self, request: pb.LoadFabricRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "LoadFabric", ""):
            caller.require("admin")
            if not request.fabric_json:
                raise InvalidArgument("fabric_json", "required: a fabric file as JSON (`propius fabric load FILE`)")
            if len(request.fabric_json) > MAX_FABRIC_BYTES:
                raise InvalidArgument("fabric_json", f"larger than {MAX_FABRIC_BYTES} bytes")
            try:
                document = json.loads(request.fabric_json)
            except (ValueError, RecursionError) as error:
                raise InvalidArgument("fabric_json", f"not JSON ({type(error).__name__})") from None
            try:
                fabric = parse_fabric(document)
            except FabricError as error:
                raise InvalidArgument(f"fabric_json: {error.element}", error.message) from None
            return _change(await self._fabric.load(fabric))

    @rpc_errors
    async def GetFabric(self, request: pb.GetFabricRequest, context: grpc.aio.ServicerContext):
        await self._guard.job_caller(context, "read")
        view = await self._fabric.current()
        if view is None:
            return pb.FabricInfo(placement=self._fabric.placement.name)
        waiting = [job_placement(job, pending.request.accelerators, None, pending.reason, pending.since, view.state)
                   for job, pending in sorted(view.record.pending.items(), key=lambda item: item[1].since)]
        return pb.FabricInfo(version=view.record.version, fabric_json=view.record.document,
                             state_json=snapshot(view.state).model_dump_json(), waiting=waiting,
                             placement=self._fabric.placement.name)

    @rpc_errors
    async def FailAccelerator(self, request: pb.AcceleratorRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "FailAccelerator", request.accelerator):
            caller.require("admin")
            accelerator = require_id(request.accelerator, "accelerator")
            await self._jobs.refresh()
            return _change(await self._fabric.fail(accelerator))

    @rpc_errors
    async def RepairAccelerator(self, request: pb.AcceleratorRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "RepairAccelerator", request.accelerator):
            caller.require("admin")
            return _change(await self._fabric.repair(require_id(request.accelerator, "accelerator"),
                                                     request.spare))
