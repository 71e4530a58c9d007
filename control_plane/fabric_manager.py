"""The cloud fabric inside the control plane: placing jobs' cloud requests, releasing them, failures.

One :class:`FabricManager` per control plane holds the fabric's state in memory, as read from SQL
(:mod:`control_plane.fabric_store`). Every change follows one path: under this plane's lock, rebuild a
private copy of the state, change the copy (place, release, fail, repair, load; the placement plug-in
and :func:`propius.fabric.recovery.recover` run on it), commit the difference to SQL moving the version
by one (compare-and-set), and only then make the copy the state in memory. A refused change raises
before the commit and leaves no trace; a change another shard committed first is re-read and retried.

A cloud request that cannot be placed now waits in a queue (oldest first) with the placement's stated
reason; the queue is retried whenever accelerators come back (a job released, a repair, a new fabric).
Jobs placed from the queue get a ``fabric_placed`` event; a job whose accelerator failed gets a
``fabric_recovery`` event: it restarts from its checkpoint (on the spare, or elsewhere), or waits. A
preemptible job whose lent spare a failure reclaims gets a ``fabric_preempted`` event and waits in the
queue (beyond ``max_waiting`` if need be: it was admitted; at most one per spare) until it fits again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from control_plane.errors import Conflict, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from control_plane.events import Event, EventBus
from control_plane.fabric_store import FabricRecord, FabricStore, Pending, StaleFabric
from control_plane.journal import Journal
from policies.placement.base import Placement
from propius.fabric.model import AcceleratorState, Fabric, FabricError, parse_fabric
from propius.fabric.recovery import Recovery, RecoveryParams, recover
from propius.fabric.request import CloudRequest
from propius.fabric.snapshot import bare, restore, snapshot
from propius.fabric.state import Allocation, FabricState, Unplaceable

__all__ = ["MAX_FABRIC_BYTES", "FabricManager", "FabricView", "Outcome", "fabric_document", "preemption_detail",
           "recovery_detail"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_ATTEMPTS = 5  # commits lost to other shards before a change is answered UNAVAILABLE
MAX_FABRIC_BYTES = 16 << 20


def fabric_document(fabric: Fabric) -> str:
    """The stored form of a validated fabric (read back with :func:`parse_fabric`)."""
    return fabric.model_dump_json(exclude_defaults=True)


@dataclass(frozen=True)
class FabricView:
    """The fabric as committed at ``record.version``; ``state`` is never changed in place."""

    record: FabricRecord
    fabric: Fabric
    state: FabricState

    @property
    def file_jobs(self) -> set[str]:
        return _file_jobs(self.fabric)


@dataclass
class _Work:
    """A private copy being changed; ``changed`` once anything differs from what was read."""

    document: str
    fabric: Fabric
    state: FabricState
    pending: dict[str, Pending]
    now: float
    changed: bool = False
    placed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What a change did: the version it committed, waiting jobs it placed, the recovery of a failure."""

    version: int
    placed: tuple[str, ...] = ()
    recovery: Recovery | None = None
    failed: str = ""


class FabricManager:
    def __init__(self, store: FabricStore, placement: Placement, *, journal: Journal, bus: EventBus,
                 request_of: Callable[[str], CloudRequest | None], is_finished: Callable[[str], bool],
                 max_waiting: int, params: RecoveryParams | None = None) -> None:
        """``request_of(job)``: a live job's cloud request (None: unknown here); ``is_finished(job)``: the
        registry knows the job completed or was cancelled (its accelerators are then released)."""
        self._store = store
        self.placement = placement
        self._journal = journal
        self._bus = bus
        self._request_of = request_of
        self._is_finished = is_finished
        self._max_waiting = max_waiting
        self._params = params or RecoveryParams()
        self._view: FabricView | None = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------ reading

    async def start(self) -> None:
        self._view = await asyncio.to_thread(self._read)

    @property
    def view(self) -> FabricView | None:
        """The state as this plane last read or wrote it (see :meth:`refresh`)."""
        return self._view

    async def current(self) -> FabricView | None:
        """The state as committed now (one SQL read of the version; the rest when another shard changed it)."""
        version = await asyncio.to_thread(self._store.version)
        if version != (self._view.record.version if self._view else 0):
            async with self._lock:
                self._view = await asyncio.to_thread(self._read)
        return self._view

    async def refresh(self, _now: float) -> None:
        """Every scheduler tick: follow other shards' changes; release what finished jobs still hold (a job
        cancelled by the idle expiry, or finished on a shard that failed before releasing)."""
        view = await self.current()
        if view is None:
            return
        done = [job for job in {*view.state.allocations, *view.record.pending}
                if job not in view.file_jobs and self._is_finished(job)]
        for job in done:
            await self.release(job)

    def _read(self) -> FabricView | None:
        record = self._store.read()
        if record is None:
            return None
        fabric = parse_fabric(json.loads(record.document))
        return FabricView(record, fabric, restore(fabric, record.snapshot))

    def placement_of(self, job_id: str) -> tuple[Allocation | None, Pending | None, FabricState | None]:
        """The job's allocation or its place in the queue, from this plane's view."""
        view = self._view
        if view is None:
            return None, None, None
        return view.state.allocations.get(job_id), view.record.pending.get(job_id), view.state

    # ------------------------------------------------------------ checks before a job is registered

    async def check(self, request: CloudRequest) -> None:
        """Refuse a request that can never be placed (INVALID_ARGUMENT naming the field) or that finds the
        queue full (RESOURCE_EXHAUSTED); called before the job is written."""
        view = await self.current()
        count_field = "cloud.count" if request.count is not None else "cloud.shards"
        if view is None:
            raise InvalidArgument("cloud", "this control plane has no fabric loaded (`propius fabric load FILE`)")
        total = len(view.fabric.accelerators)
        if request.accelerators > total:
            raise InvalidArgument(count_field, f"{request.accelerators} accelerators requested, the fabric has "
                                               f"{total}")
        found = await asyncio.to_thread(self.placement.allocation_for, request, _pristine(view))
        if isinstance(found, Unplaceable):
            raise InvalidArgument("cloud.shape" if request.shape is not None else count_field,
                                  f"can never be placed by the {self.placement.name!r} placement on this fabric, "
                                  f"even with every accelerator but the spares free: {found.reason}")
        if len(view.record.pending) >= self._max_waiting:
            raise ResourceExhausted(f"cloud: {self._max_waiting} cloud requests already wait for accelerators")

    # ------------------------------------------------------------ changes

    async def place(self, job_id: str, request: CloudRequest) -> Outcome:
        """Place the job now, or queue it with the placement's reason (idempotent for a job already in)."""

        def change(work: _Work) -> None:
            if not work.document:
                raise InvalidArgument("cloud", "this control plane has no fabric loaded (`propius fabric load FILE`)")
            if job_id in work.state.allocations or job_id in work.pending:
                return
            if len(work.pending) >= self._max_waiting:
                raise ResourceExhausted(f"cloud: {self._max_waiting} cloud requests already wait for accelerators")
            reason = self._try(work, job_id, request)
            if reason is not None:
                work.pending[job_id] = Pending(request, reason, work.now)
            work.changed = True

        return (await self._change(change))[0]

    async def release(self, job_id: str) -> Outcome:
        """Take back the job's accelerators (or its place in the queue), then place what waits."""

        def change(work: _Work) -> None:
            if job_id in work.state.allocations:
                work.state.release(job_id)
                work.changed = True
            if work.pending.pop(job_id, None) is not None:
                work.changed = True
            if work.changed:
                self._retry(work)

        return (await self._change(change))[0]

    async def fail(self, accelerator: str) -> Outcome:
        """Mark the accelerator failed and recover its job (:func:`recover`): in-rack or electrical swap onto a
        spare, migration through the placement, or the queue."""

        def change(work: _Work) -> Recovery:
            state = _known(work.state, accelerator)
            if state.state(accelerator) == AcceleratorState.FAILED:
                raise Conflict(f"accelerator: {accelerator!r} is already failed (`propius fabric repair` it first)")
            job = state.job_of(accelerator)
            request = self._request_for(job, state) if job is not None else None

            def relocate(current: FabricState, _n: int) -> Allocation | None:
                assert request is not None
                found = self.placement.allocation_for(request, current)
                return found if isinstance(found, Allocation) else None

            sizes = {held: len(a.accelerators) for held, a in state.allocations.items()}
            recovery = recover(state, accelerator, self._params, relocate)
            work.changed = True
            if recovery.kind in ("migrate", "queue") or recovery.preempted:  # accelerators are free again
                self._retry(work)
            if recovery.kind == "queue" and recovery.job is not None and request is not None:
                work.pending[recovery.job] = Pending(
                    request, f"accelerator {accelerator} failed and no spare or free accelerators could take the "
                             f"job: waiting for a repair", work.now)
            if recovery.preempted:  # after the older waiters, it may fit elsewhere at once
                preempted = self._request_of(recovery.preempted) or CloudRequest(
                    count=sizes[recovery.preempted], preemptible=True)
                if self._try(work, recovery.preempted, preempted) is not None:
                    work.pending[recovery.preempted] = Pending(
                        preempted, f"preempted: spare reclaimed for {accelerator}", work.now)
            return recovery

        outcome, recovery = await self._change(change)
        self._journal.event("fabric_failure", recovery.job, accelerator=accelerator, recovery=recovery.kind,
                            spare=recovery.spare, time_s=recovery.time_s)
        if recovery.job is not None:
            await self._bus.publish(Event("fabric_recovery", recovery.job,
                                          detail=recovery_detail(accelerator, recovery)))
        if recovery.preempted is not None:
            self._journal.event("fabric_preempted", recovery.preempted, accelerator=accelerator,
                                spare=recovery.spare, for_job=recovery.job)
            await self._bus.publish(Event("fabric_preempted", recovery.preempted,
                                          detail=preemption_detail(accelerator, recovery)))
        return Outcome(outcome.version, outcome.placed, recovery, accelerator)

    async def repair(self, accelerator: str, spare: bool) -> Outcome:
        """A failed accelerator is back, free or as a spare; waiting requests are retried."""

        def change(work: _Work) -> None:
            state = _known(work.state, accelerator)
            if state.state(accelerator) != AcceleratorState.FAILED:
                raise Conflict(f"accelerator: {accelerator!r} is {state.state(accelerator)}, not failed")
            state.set_state(accelerator, AcceleratorState.SPARE if spare else AcceleratorState.FREE)
            work.changed = True
            self._retry(work)

        return (await self._change(change))[0]

    async def load(self, fabric: Fabric) -> Outcome:
        """Replace the fabric. Allocations the control plane made are carried over and must fit the new
        fabric (else FAILED_PRECONDITION naming the job and what stands in the way: loading it would orphan
        them); allocations the old file declared give way to the new file's. Waiting requests are retried."""

        def change(work: _Work) -> None:
            old_file_jobs = _file_jobs(work.fabric)
            carried = {job: a for job, a in work.state.allocations.items() if job not in old_file_jobs}
            state = FabricState(fabric)
            for job, allocation in sorted(carried.items()):
                for acc in set(allocation.accelerators) - set(allocation.lent):  # a spare swapped in is the job's
                    if acc in state.accelerators and state.state(acc) == AcceleratorState.SPARE:
                        state.set_state(acc, AcceleratorState.FREE)
                try:
                    state.allocate(job, allocation)
                except FabricError as error:
                    raise Conflict(f"fabric_json: loading this fabric would orphan job {job!r}'s accelerators "
                                   f"({error}); complete or cancel it first") from None
            work.document, work.fabric, work.state = fabric_document(fabric), fabric, state
            work.changed = True
            self._retry(work)

        return (await self._change(change))[0]

    # ------------------------------------------------------------ internals

    def _try(self, work: _Work, job_id: str, request: CloudRequest) -> str | None:
        """Place ``job_id`` on the work copy; None when placed, else why not."""
        found = self.placement.allocation_for(request, work.state)
        if isinstance(found, Unplaceable):
            return found.reason
        try:
            work.state.allocate(job_id, found)
        except FabricError as error:  # the plug-in proposed what the state refuses: the job waits, logged
            log.error("placement %s proposed an invalid allocation for job %s: %s", self.placement.name, job_id,
                      error, extra={"job_id": job_id})
            return f"the {self.placement.name!r} placement proposed an invalid allocation ({error})"
        work.placed.append(job_id)
        return None

    def _retry(self, work: _Work) -> None:
        """Place what waits, oldest first; those still waiting get the placement's current reason."""
        for job_id, pending in sorted(work.pending.items(), key=lambda item: (item[1].since, item[0])):
            reason = self._try(work, job_id, pending.request)
            if reason is None:
                del work.pending[job_id]
            elif reason != pending.reason:
                work.pending[job_id] = Pending(pending.request, reason, pending.since)
            work.changed = True

    def _request_for(self, job: str, state: FabricState) -> CloudRequest:
        """The job's cloud request, or (a job the file declared) one for as many accelerators as it holds."""
        request = self._request_of(job)
        return request if request is not None else CloudRequest(count=len(state.allocations[job].accelerators))

    async def _change(self, change: Callable[[_Work], T]) -> tuple[Outcome, T]:
        """Run ``change`` on a private copy and commit it (module docstring); its result beside the outcome."""
        async with self._lock:
            for _ in range(_ATTEMPTS):
                view = self._view
                if view is None or await asyncio.to_thread(self._store.version) != view.record.version:
                    view = self._view = await asyncio.to_thread(self._read)
                work = await asyncio.to_thread(_work_on, view)
                result = await asyncio.to_thread(change, work)
                if not work.changed:
                    return Outcome(view.record.version if view else 0), result
                new = FabricRecord((view.record.version if view else 0) + 1, work.document,
                                   snapshot(work.state), work.pending)
                try:
                    await asyncio.to_thread(self._store.commit, view.record if view else None, new, work.now)
                except StaleFabric:
                    log.info("the fabric changed on another shard meanwhile; re-reading and retrying")
                    self._view = None
                    continue
                self._view = FabricView(new, work.fabric, work.state)
                break
            else:
                raise Unavailable("the fabric kept changing under other control-plane shards; retry")
        for job in work.placed:
            self._journal.event("fabric_placed", job, accelerators=list(work.state.allocations[job].accelerators))
            await self._bus.publish(Event("fabric_placed", job))
        return Outcome(new.version, tuple(work.placed)), result


def _file_jobs(fabric: Fabric) -> set[str]:
    """Jobs the fabric file itself declares (outside Propius): the next file replaces their allocations."""
    return {acc.job for acc in fabric.accelerators if acc.job is not None}


def _work_on(view: FabricView | None) -> _Work:
    """A private copy of the view's state (an empty one before any fabric: only a load changes it)."""
    now = time.time()
    if view is None:
        return _Work("", _NO_FABRIC, FabricState(_NO_FABRIC), {}, now)
    return _Work(view.record.document, view.fabric, restore(view.fabric, view.record.snapshot),
                 dict(view.record.pending), now)


_NO_FABRIC = Fabric(sites=[], racks=[], hosts=[], accelerators=[])


def _known(state: FabricState, accelerator: str) -> FabricState:
    if not state.accelerators:
        raise Conflict("no fabric is loaded (`propius fabric load FILE`)")
    if accelerator not in state.accelerators:
        raise NotFound(f"accelerator {accelerator!r} is not in the fabric")
    return state


def _pristine(view: FabricView) -> FabricState:
    """The fabric with every accelerator free but its spares: what a request needs to fit at all."""
    spares = {acc for acc in view.state.accelerators if view.state.state(acc) == AcceleratorState.SPARE}
    state = FabricState(bare(view.fabric))
    for acc in state.accelerators:
        state.set_state(acc, AcceleratorState.SPARE if acc in spares else AcceleratorState.FREE)
    return state


def recovery_detail(accelerator: str, recovery: Recovery) -> dict[str, Any]:
    """A recovery as an event's detail (JSON): what the job is told."""
    return {"kind": recovery.kind, "failed": accelerator, "spare": recovery.spare or "",
            "components": dict(recovery.components), "time_s": recovery.time_s, "throughput": recovery.throughput}


def preemption_detail(accelerator: str, recovery: Recovery) -> dict[str, Any]:
    """What a preempted job is told (JSON, read as a FabricRecovery of kind "preempted"): the failure whose
    recovery reclaimed its spare; it restarts from its checkpoint once placed again."""
    return {"kind": "preempted", "failed": accelerator, "spare": recovery.spare or "", "components": {},
            "time_s": 0.0, "throughput": 0.0}
