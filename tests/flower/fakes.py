"""Fake Flower nodes over raw gRPC: they bind like devices and answer (or misbehave) without a ClientApp."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc
from flwr.app import ConfigRecord, Message, RecordDict

from clients.flower.codec import decode_bundle, encode_bundle, stamp_id
from clients.flower.ids import node_id_for
from data_plane.tensors import decode, encode
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import channel_options

Behaviour = Callable[["FakeNode", list[Message]], list[Message]]


def echo(node: FakeNode, messages: list[Message]) -> list[Message]:
    return [Message(RecordDict({"echo": ConfigRecord({"node": str(node.node_id)})}), reply_to=m) for m in messages]


def impostor(node: FakeNode, messages: list[Message]) -> list[Message]:
    """Answers a message nobody sent, and pretends to be another node."""
    bogus = Message(RecordDict({"q": ConfigRecord({})}), node.node_id, "query")
    stamp_id(bogus)
    wrong_sender = echo(node, messages)[0]
    wrong_sender.metadata.__dict__["_src_node_id"] = node.node_id + 1
    return [*echo(node, [bogus]), wrong_sender]


class FakeNode:
    """``behaviour`` answers; ``hold`` keeps the lease without answering; ``vanish`` stops heart-beating."""

    def __init__(self, address: str, name: str, mode: str = "answer", behaviour: Behaviour = echo) -> None:
        self.client_id = name
        self.node_id = node_id_for(name)
        self.mode = mode
        self.behaviour = behaviour
        self.bound = asyncio.Event()
        self._channel = grpc.aio.insecure_channel(address, options=channel_options())
        self._clients = pb_grpc.ClientServiceStub(self._channel)
        self._data = pb_grpc.DataServiceStub(self._channel)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeNode:
        self._task = asyncio.create_task(self._serve())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self._task
        await self._channel.close()

    async def _serve(self) -> None:
        while True:
            profile = pb.ClientProfile(client_id=self.client_id, device_class="edge")
            checkin = await self._clients.CheckIn(pb.CheckInRequest(profile=profile, wait_s=2.0, max_offers=4))
            for offer in checkin.offers:
                accept = await self._clients.Accept(pb.AcceptRequest(
                    client_id=self.client_id, session_token=checkin.session_token, offer_id=offer.offer_id))
                if accept.bound:
                    self.bound.set()
                    await self._work(checkin.session_token, accept)
                    break

    async def _work(self, token: str, accept: pb.AcceptResponse) -> None:
        request = pb.FetchModelRequest(client_id=self.client_id, session_token=token, job_id=accept.job_id,
                                       round=accept.round)
        payload = b"".join([chunk.data async for chunk in self._data.FetchModel(request)])
        messages = decode_bundle(decode(payload)).inflate(self.node_id)
        if self.mode == "vanish":
            await asyncio.Event().wait()
        if self.mode == "hold":
            beat = pb.HeartbeatRequest(client_id=self.client_id, session_token=token, job_id=accept.job_id,
                                       round=accept.round)
            while (await self._clients.Heartbeat(beat)).valid:
                await asyncio.sleep(0.3)
            return
        replies = self.behaviour(self, messages)
        for reply in replies:
            stamp_id(reply)
        header = pb.UploadUpdateRequest(client_id=self.client_id, session_token=token, job_id=accept.job_id,
                                        round=accept.round, attempt=accept.attempt, num_samples=1.0,
                                        data=encode(encode_bundle({self.node_id: replies})))
        await self._data.UploadUpdate(iter([header]))
