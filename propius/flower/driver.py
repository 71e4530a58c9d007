"""A Flower run on Propius, asynchronously: every Grid send wave is one Propius round.

``node_ids`` opens a round (if none is waiting for messages) and returns the nodes of the clients
Propius bound to it; ``push`` adds messages to that round and publishes them as the round's model
once every bound node has one, or after a short linger (Flower's legacy server pushes one message
per thread); clients reply through the collecting data plane. The wave closes when every addressed
client delivered or is gone, when the ServerApp's timeout passes, or just before the round's
deadline; its replies then wait for ``pull``. Binds, uploads, releases and drops are read from the
job's event stream (WatchJob), so nothing polls while a round runs.

A run may begin with a warm-up round (``warm_up``): it carries no message, and the clients that take
it start the app's ClientApp workers (a Python start and, typically, an import of torch) while the
ServerApp process is still importing its own app. It ends when the ServerApp first asks for nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import grpc
from flwr.app import Message
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message

from clients.flower.codec import encode_bundle
from clients.flower.ids import node_id_for
from propius.flower.job import FlowerJob
from propius.flower.partitions import PartitionMap
from propius.flower.wave import Wave
from propius.proto import propius_pb2 as pb
from propius.sdk import RoundFailed

__all__ = ["Driver"]

log = logging.getLogger(__name__)

LINGER_S = 0.05  # pushes this close together form one wave
BIND_GRACE_S = 0.5  # with over-selection: how long to wait for binds beyond the demand
DEADLINE_MARGIN_S = 2.0  # close a wave this long before its round's deadline, so it cannot fail
WARM_UP_S = 30.0  # a warm-up round waits at most this long for its first delivery


class Driver:
    def __init__(self, job: FlowerJob, partitions: PartitionMap) -> None:
        self.job = job
        self._partitions = partitions
        self._wave: Wave | None = None
        self._replies: dict[str, Message] = {}  # instruction message id -> reply, until pulled
        self._events: deque[pb.JobEvent] = deque(maxlen=10_000)  # replayed into a wave that opens late
        self._changed = asyncio.Condition()
        self._opening = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._warm_up: asyncio.Task[None] | None = None
        self._wanted = asyncio.Event()  # the ServerApp asked for nodes: a warm-up round should end

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        ready = asyncio.Event()
        self._watcher = asyncio.create_task(self._watch(ready))
        await asyncio.wait_for(ready.wait(), 30)

    def warm_up(self) -> None:
        """Open the warm-up round in the background (see the module docstring)."""
        self._warm_up = asyncio.create_task(self._run_warm_up())

    async def stop(self) -> None:
        if self._warm_up is not None:
            self._warm_up.cancel()
        for timer in self._timers:
            timer.cancel()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._watcher

    # ---------------------------------------------------------------- Grid operations

    async def node_ids(self) -> list[int]:
        await self._end_warm_up()
        wave = self._wave
        if wave is None or wave.closing:
            wave = await self._open_wave()
        return wave.nodes

    async def push(self, messages: list[Message]) -> Wave | None:
        """Messages with ids set (see :func:`clients.flower.codec.stamp_id`), all into one wave."""
        if not messages:
            return None
        await self._end_warm_up()
        wave = await self._wave_for_push()
        live = set(wave.nodes)
        for message in messages:
            if message.metadata.dst_node_id in live:
                wave.messages[message.metadata.message_id] = message
            else:
                self._replies[message.metadata.message_id] = create_message_error_unavailable_res_message(
                    message.metadata, "node_unavail")
        for timer in self._timers:
            timer.cancel()
        if wave.covers_all_nodes():
            await self._publish(wave)
        else:
            self._timers = [asyncio.get_running_loop().call_later(LINGER_S, lambda: self._spawn(self._publish(wave)))]
        await self._notify()
        return wave

    def pull(self, message_ids: Iterable[str]) -> list[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    async def send(self, messages: list[Message], timeout: float | None) -> list[Message]:
        """Push, then wait for the wave to close (or ``timeout``, which closes it); the replies."""
        ids = [message.metadata.message_id for message in messages]
        wave = await self.push(messages)
        if wave is not None:
            try:
                await self._until(lambda: wave.closed or set(ids) <= self._replies.keys(), timeout)
            except TimeoutError:
                await self._close(wave)
        return self.pull(ids)

    # ---------------------------------------------------------------- waves

    async def _open_wave(self) -> Wave:
        async with self._opening:
            wave = self._wave
            if wave is not None and not wave.closing:
                return wave
            if wave is not None:
                await self._until(lambda: wave.closed)
            info = await self._start_round()
            wave = Wave(round=info.round, attempt=info.attempt, demand=info.demand, target=info.target,
                        started_unix=info.started_unix)
            self._wave = wave
            for event in list(self._events):
                self._apply(wave, event)
            margin = max(info.deadline_unix - info.started_unix - DEADLINE_MARGIN_S, 0.0)
            asyncio.get_running_loop().call_later(margin, lambda: self._spawn(self._close(wave)))
            spec = self.job.spec
            with contextlib.suppress(TimeoutError):
                await self._until(lambda: len(wave.nodes) >= wave.demand, spec.schedule_timeout_s)
            with contextlib.suppress(TimeoutError):
                await self._until(lambda: len(wave.nodes) >= wave.target, BIND_GRACE_S)
            log.debug("round %d: %d of %d nodes bound", wave.round, len(wave.nodes), wave.target)
            return wave

    async def _run_warm_up(self) -> None:
        async with self._opening:
            info = await self._start_round()
            wave = Wave(round=info.round, attempt=info.attempt, demand=info.demand, target=info.target,
                        started_unix=info.started_unix, warm_up=True, published=True)
            self._wave = wave
            for event in list(self._events):
                self._apply(wave, event)
            meta = {"round": wave.round, "attempt": wave.attempt}
            await self.job.publish_model(wave.round, encode_bundle({}, meta))
        # Closed on a delivery, never empty: a failed round would hand this round's blob to the next one.
        with contextlib.suppress(TimeoutError):
            await self._until(lambda: len(wave.delivered) >= wave.demand
                              or (self._wanted.is_set() and bool(wave.delivered)), WARM_UP_S)
        await self._close(wave)

    async def _end_warm_up(self) -> None:
        self._wanted.set()
        await self._notify()
        if self._warm_up is not None:
            await asyncio.shield(self._warm_up)

    async def _start_round(self) -> pb.RoundInfo:
        try:
            return await self.job.start_round()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        # A round of this job is still open that no wave owns (re-opened after a control-plane restart).
        current = (await self.job.info()).current_round
        await self.job.end_round(current.round)
        return await self.job.start_round()

    async def _wave_for_push(self) -> Wave:
        while True:
            wave = self._wave
            if wave is None or wave.closing:
                return await self._open_wave()
            if not wave.published:
                return wave
            await self._until(lambda: wave.closing)  # noqa: B023 - the wave of this iteration

    async def _publish(self, wave: Wave) -> None:
        if wave.published or wave.closing or not wave.messages:
            return
        wave.published = True
        by_node: dict[int, list[Message]] = {}
        for message in wave.messages.values():
            by_node.setdefault(message.metadata.dst_node_id, []).append(message)
        partitions = self._partitions.assign(wave.nodes)
        node_config = {str(node): {"partition-id": p, "num-partitions": self._partitions.partitions}
                       for node, p in partitions.items()}
        meta = {"round": wave.round, "attempt": wave.attempt, "node_config": node_config}
        tensors = await asyncio.to_thread(encode_bundle, by_node, meta)
        await self.job.publish_model(wave.round, tensors)
        log.debug("round %d: published %d messages for %d nodes", wave.round, len(wave.messages), len(by_node))
        await self._settle(wave)

    async def _close(self, wave: Wave) -> None:
        if wave.closing:
            await self._until(lambda: wave.closed)
            return
        wave.closing = True
        for timer in self._timers:
            timer.cancel()
        await self._notify()
        if len(wave.delivered) < wave.demand:  # with `demand` results (min_results) it closes by itself
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.job.end_round(wave.round)
        try:
            payloads = (await self.job.await_aggregate(wave.round, timeout_s=60)).tensors
        except (RoundFailed, TimeoutError):  # no result, or a control plane that did not close it
            payloads = {}
        self._replies.update(await asyncio.to_thread(wave.replies, payloads))
        wave.closed = True
        log.debug("round %d closed: %d replies", wave.round, len(payloads))
        await self._notify()

    async def _settle(self, wave: Wave) -> None:
        if wave.settled() and not wave.closing:
            await self._close(wave)

    # ---------------------------------------------------------------- events

    async def _watch(self, ready: asyncio.Event) -> None:
        """Follow the job's events; a control-plane restart only interrupts the stream."""
        while True:
            try:
                async for event in self.job.watch():
                    if event.kind == "snapshot":
                        ready.set()
                    else:
                        await self._on_event(event)
                return  # the job finished
            except grpc.aio.AioRpcError as error:
                if error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                await asyncio.sleep(0.5)

    async def _on_event(self, event: pb.JobEvent) -> None:
        self._events.append(event)
        wave = self._wave
        if wave is None or wave.closing:
            return
        self._apply(wave, event)
        await self._notify()
        if event.kind in ("round_closed", "round_failed") and event.round.round == wave.round:
            self._spawn(self._close(wave))
        else:
            await self._settle(wave)

    def _apply(self, wave: Wave, event: pb.JobEvent) -> None:
        """Fold one event into the wave."""
        if event.at_unix < wave.started_unix:
            return
        client = event.client_id
        if event.kind == "client_bound":
            wave.bound.setdefault(client, node_id_for(client))
        elif event.kind == "update_accepted":
            wave.delivered.add(client)
        elif event.kind == "client_released" and client in wave.bound:
            wave.released.add(client)
        elif event.kind == "client_dropped" and client in wave.bound:
            wave.dropped.add(client)
            log.info("round %d: client %s dropped", wave.round, client)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background; a failure is logged, not lost."""
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None
                               or log.error("flower grid: %s", t.exception(), exc_info=t.exception()))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _until(self, predicate: Callable[[], bool], timeout: float | None = None) -> None:
        """Wait for ``predicate``; raises TimeoutError after ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        async with self._changed:
            while not predicate():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(self._changed.wait(), remaining)
