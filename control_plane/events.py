"""Job and round events, fanned out through Redis pub/sub so every control-plane shard sees them.

A shard publishes what it changed and dispatches it to its own listeners at once; every other shard
receives it through pub/sub and wakes its own long-polling clients, job watchers and aggregate waiters.
An event carries its publisher's bus id, so the publisher skips pub/sub's copy: each shard applies each
event once, and its own changes without waiting for pub/sub (on a Redis Cluster, pub/sub's copy can
arrive after the caller's next request).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub

from control_plane.redis_client import AnyRedis

__all__ = ["Event", "EventBus"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    kind: str
    job_id: str
    round: int = 0
    attempt: int = 0
    client_id: str = ""
    slots: int = 0  # bind slots this event opened (round_started, client_dropped, client_released)
    at: float = field(default_factory=time.time)
    bound: int = -1  # the round's bound count after the event, where it changed it
    origin: str = ""  # the bus that published it; it already dispatched the event locally
    state: dict[str, str] | None = None  # the round's full state, on round_started / round_closed / round_failed
    model_kbit: float = 0.0  # on model_published: the model's size
    fetch_end: float = 0.0  # on update_accepted: the device's reported phases, on the server clock (0: none)
    train_s: float = 0.0
    passed_over: str = ""  # on client_bound: the older job FIFO would have given the client (fifo_lag)
    detail: dict[str, Any] | None = None  # on fabric_recovery: the recovery (control_plane.fabric_manager)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)  # the fields, flat (asdict's deep copy costs 3x, on every bind)

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        return cls(**json.loads(text))


class EventBus:
    def __init__(self, redis: AnyRedis, channel: str) -> None:
        self._redis = redis
        self._channel = channel
        self._queues: dict[str, set[asyncio.Queue[Event]]] = defaultdict(set)
        self._listeners: list[Callable[[Event], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.id = uuid.uuid4().hex
        self._first_node = random.randrange(1 << 16)
        self.node = ""  # on a Redis Cluster: the node (host:port) this bus subscribes on
        self._ready = asyncio.Event()

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    async def publish(self, event: Event) -> None:
        """Dispatch here at once (this shard's view must not lag its own changes), then to every shard."""
        event = replace(event, origin=self.id)
        self._dispatch(event)
        await self._redis.publish(self._channel, event.to_json())

    def deliver(self, event: Event) -> None:
        """Dispatch here an event a Lua script published with this bus's id as origin (atomically with the
        change it announces, e.g. a bind); pub/sub's copy is skipped on arrival."""
        if event.origin != self.id:
            raise ValueError(f"event of bus {event.origin!r} delivered to bus {self.id!r}")
        self._dispatch(event)

    @contextlib.contextmanager
    def subscribe(self, job_id: str):  # noqa: ANN201 - a context manager yielding the queue
        queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=10_000)
        self._queues[job_id].add(queue)
        try:
            yield queue
        finally:
            self._queues[job_id].discard(queue)
            if not self._queues[job_id]:
                del self._queues[job_id]

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="propius-events")
        await asyncio.wait_for(self._ready.wait(), 10)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _pubsub(self, attempt: int) -> PubSub:
        """On a Redis Cluster, PUBLISH reaches subscribers on every node: subscribe to one node, starting at a
        random one (spreading the shards) and moving to the next on each failure (a dead node)."""
        if isinstance(self._redis, aioredis.RedisCluster):
            nodes = sorted(self._redis.get_nodes(), key=lambda node: node.name)
            node = nodes[(self._first_node + attempt) % len(nodes)]
            self.node = node.name
            return self._redis.pubsub(node=node, ignore_subscribe_messages=True)
        return self._redis.pubsub(ignore_subscribe_messages=True)

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                async with self._pubsub(attempt) as pubsub:
                    await pubsub.subscribe(self._channel)
                    self._ready.set()
                    async for message in pubsub.listen():
                        event = Event.from_json(message["data"])
                        if event.origin != self.id:
                            self._dispatch(event)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a Redis blip must not end event delivery
                log.warning("event subscription lost; resubscribing", exc_info=True)
                attempt += 1
                await asyncio.sleep(0.5)

    def _dispatch(self, event: Event) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:  # noqa: BLE001
                log.exception("event listener failed")
        for queue in self._queues.get(event.job_id, ()):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)
