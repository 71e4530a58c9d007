"""Propius choosing among a Flower runtime's nodes: each node is a proxy client of one Propius job.

For runs that stay on Flower's SuperLink or simulation. Each selection is one Propius round: the job
opens it, every node the Flower runtime reports checks in as a proxy client with its profile, and
the proxies Propius binds (eligibility, policy, over-selection; other jobs compete as usual) are the
selected nodes. After the Flower round, proxies of nodes that replied upload a one-byte
acknowledgement weighted by the reply's ``num-examples`` (with its metrics), the others release, and
the round closes: Propius's journal and traces see the Flower round like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import threading
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import numpy as np
from flwr.app import Message

from clients.transport import Stubs, open_channel, upload_messages
from data_plane.tensors import encode
from propius.config import ChannelSecurity
from propius.flower.job import FlowerJob
from propius.proto import propius_pb2 as pb
from propius.sdk import RoundFailed
from propius.specs import ClientProfile, JobSpec

__all__ = ["Selection", "Selector"]

T = TypeVar("T")
ACK = {"ack": np.zeros(1, np.uint8)}
BIND_WAIT_S = 1.0  # how long a proxy check-in waits for the round to reach the offer view
ProfileFn = Callable[[int], ClientProfile]


@dataclass
class Selection:
    """One Propius round over Flower nodes: who Propius bound, and who then replied."""

    round: int
    selected: list[int]
    replied: list[int] = field(default_factory=list)


@dataclass
class _Proxy:
    node_id: int
    client_id: str
    session: str = ""
    heartbeat: asyncio.Task[None] | None = None


class Selector:
    """Synchronous facade (Flower strategies are synchronous) over a private event loop."""

    def __init__(self, spec: JobSpec, server: str, profile: ProfileFn, security: ChannelSecurity | None = None) -> None:
        self.history: list[Selection] = []
        self._server = server
        self._profile = profile
        self._job = FlowerJob(spec, server, security=security)
        self._proxies: dict[int, _Proxy] = {}
        self._bound: list[_Proxy] = []
        self._round: pb.RoundInfo | None = None
        self._stubs: Stubs | None = None
        self._channel: grpc.aio.Channel | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="propius-selector", daemon=True)
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def select(self, nodes: Iterable[int]) -> list[int]:
        """Open a round and return the nodes Propius bound to it."""
        return self._call(self._select(list(nodes)))

    def report(self, replies: Iterable[Message]) -> None:
        """Close the open round with the replies of the Flower round it served."""
        self._call(self._report(list(replies)))

    def close(self, failed: bool = False) -> None:
        try:
            self._call(self._close(failed))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    # ---------------------------------------------------------------- async side

    async def _select(self, nodes: list[int]) -> list[int]:
        """Open the round on first use; each call binds more of ``nodes`` while the round has room."""
        if self._stubs is None:
            await self._job.register()
            self._channel = open_channel(self._server, self._job.security)
            self._stubs = Stubs.of(self._channel)
        if self._round is None:
            self._round = await self._job.start_round()
            await self._job.publish_model(self._round.round, ACK)
            self.history.append(Selection(self._round.round, []))
        room = self._round.target - len(self._bound)
        bound_nodes = {proxy.node_id for proxy in self._bound}
        candidates = [self._proxies.setdefault(n, _Proxy(n, f"flower-node-{n}")) for n in nodes if n not in bound_nodes]
        if room > 0 and candidates:
            for proxy in await self._bind_all(candidates, room):
                proxy.heartbeat = asyncio.create_task(self._heartbeat(proxy, self._round.round))
                self._bound.append(proxy)
        self.history[-1].selected = [proxy.node_id for proxy in self._bound]
        return self.history[-1].selected

    async def _bind_all(self, proxies: list[_Proxy], target: int) -> list[_Proxy]:
        """Every proxy checks in at once; done when ``target`` are bound or every check-in has ended."""
        bound: list[_Proxy] = []
        enough = asyncio.Event()

        async def bind(proxy: _Proxy) -> None:
            if await self._bind(proxy):
                bound.append(proxy)
                if len(bound) >= target:
                    enough.set()

        everyone = asyncio.gather(*(bind(proxy) for proxy in proxies))
        waiter = asyncio.ensure_future(enough.wait())
        await asyncio.wait({everyone, waiter}, return_when=asyncio.FIRST_COMPLETED)
        everyone.cancel()
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await everyone
        return bound

    async def _bind(self, proxy: _Proxy) -> bool:
        assert self._stubs is not None
        profile = self._profile(proxy.node_id).model_copy(update={"client_id": proxy.client_id})
        reply = await self._stubs.clients.CheckIn(pb.CheckInRequest(
            profile=pb.ClientProfile(client_id=profile.client_id, device_class=profile.device_class.value,
                                     numeric=profile.numeric, labels=profile.labels),
            wait_s=BIND_WAIT_S,  # long-poll: the offer appears once the control plane's view has the round
        ))
        proxy.session = reply.session_token
        for offer in reply.offers:
            if offer.job_id == self._job.job_id:
                accepted = await self._stubs.clients.Accept(pb.AcceptRequest(
                    client_id=proxy.client_id, session_token=proxy.session, offer_id=offer.offer_id))
                return accepted.bound
        return False

    async def _heartbeat(self, proxy: _Proxy, round_: int) -> None:
        assert self._stubs is not None
        request = pb.HeartbeatRequest(client_id=proxy.client_id, session_token=proxy.session,
                                      job_id=self._job.job_id, round=round_)
        with contextlib.suppress(grpc.aio.AioRpcError):  # the round is over: nothing left to keep alive
            while (reply := await self._stubs.clients.Heartbeat(request)).valid:
                await asyncio.sleep(reply.lease_s / 3)

    async def _report(self, replies: list[Message]) -> None:
        assert self._stubs is not None
        selection = self.history[-1]
        answered = {m.metadata.src_node_id: m for m in replies if m.has_content()}
        selection.replied = sorted(answered)
        for proxy in self._bound:
            reply = answered.get(proxy.node_id)
            if reply is not None:
                await self._acknowledge(proxy, selection.round, reply)
            else:
                await self._stubs.clients.Release(pb.ReleaseRequest(
                    client_id=proxy.client_id, session_token=proxy.session, job_id=self._job.job_id,
                    round=selection.round))
        await self._end_round(selection.round)

    async def _acknowledge(self, proxy: _Proxy, round_: int, reply: Message) -> None:
        assert self._stubs is not None
        metrics = {k: float(v) for record in reply.content.metric_records.values() for k, v in record.items()
                   if isinstance(v, int | float) and math.isfinite(v)}
        weight = metrics.get("num-examples", 1.0) or 1.0
        header = pb.UploadUpdateRequest(client_id=proxy.client_id, session_token=proxy.session,
                                        job_id=self._job.job_id, round=round_, num_samples=weight,
                                        metrics_json=json.dumps(dict(list(metrics.items())[:64])))
        with contextlib.suppress(grpc.aio.AioRpcError):  # the round may have closed on enough results
            await self._stubs.data.UploadUpdate(upload_messages(header, encode(ACK)))

    async def _end_round(self, round_: int) -> None:
        for proxy in self._bound:
            if proxy.heartbeat is not None:
                proxy.heartbeat.cancel()
        self._bound, self._round = [], None
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._job.end_round(round_)
        with contextlib.suppress(RoundFailed):
            await self._job.await_aggregate(round_, timeout_s=30)

    async def _close(self, failed: bool) -> None:
        if self._stubs is None:
            return
        if self._round is not None:
            await self._end_round(self._round.round)
        await self._job.__aexit__(RuntimeError if failed else None, None, None)
        if self._channel is not None:
            await self._channel.close()
