"""``PropiusGrid``: Flower's ``Grid`` interface, implemented on Propius rounds.

A ServerApp calls the Grid from its own thread (Flower's legacy server: from many); every call is run
on one private event loop that owns the :class:`~propius.flower.driver.Driver`, so the round
bookkeeping needs no locks. Node ids are those of the clients Propius bound to the current round;
message ids are Flower's own (content-derived, as on a SuperLink).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from clients.flower.codec import stamp_id
from propius.config import ChannelSecurity
from propius.flower.driver import Driver
from propius.flower.job import FlowerJob
from propius.flower.partitions import PartitionMap
from propius.specs import JobSpec

__all__ = ["PropiusGrid"]

T = TypeVar("T")


class PropiusGrid(Grid):
    """Use as a context manager: entering registers the job, leaving completes it (cancels on error)."""

    def __init__(self, spec: JobSpec, server: str, partitions: int, security: ChannelSecurity | None = None) -> None:
        self._job = FlowerJob(spec, server, security=security)
        self._driver = Driver(self._job, PartitionMap(partitions))
        self._run: Run | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="propius-grid", daemon=True)

    def warm_up(self) -> None:
        """Start the run with a round that warms the clients' ClientApp workers (returns at once)."""
        self._loop.call_soon_threadsafe(self._driver.warm_up)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> PropiusGrid:
        self._thread.start()
        self._call(self._job.register())
        self._call(self._driver.start())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            self._call(self._driver.stop())
            self._call(self._job.__aexit__(exc_type, *rest))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    # ---------------------------------------------------------------- flwr.serverapp.Grid

    def set_run(self, run: Run) -> None:
        if not isinstance(run, Run):
            raise TypeError(f"`run` must be an instance of Run, got {type(run).__name__}")
        self._run = run

    @property
    def run(self) -> Run:
        if self._run is None:
            raise RuntimeError("the Grid has no run yet; call set_run first")
        return Run(**vars(self._run))

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return self._call(self._driver.node_ids())

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        prepared = self._prepare(messages)
        self._call(self._driver.push(prepared))
        return [message.metadata.message_id for message in prepared]

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        ids = list(message_ids)
        return self._call(self._pull(ids))

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self._call(self._driver.send(self._prepare(messages), timeout))

    # ---------------------------------------------------------------- helpers

    async def _pull(self, ids: list[str]) -> list[Message]:
        return self._driver.pull(ids)

    def _prepare(self, messages: Iterable[Message]) -> list[Message]:
        """Validate as a SuperLink does and stamp Flower's message ids (in the caller's thread: it hashes)."""
        prepared = []
        for message in messages:
            meta = message.metadata
            if meta.reply_to_message_id or meta.ttl <= 0 or meta.delivered_at:
                raise ValueError(f"Invalid message: {message}")
            stamp_id(message)
            prepared.append(message)
        return prepared
