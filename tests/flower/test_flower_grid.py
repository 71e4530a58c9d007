"""The Grid contract on Propius: message ids, reply matching, timeouts, unknown replies, lost nodes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.constant import ErrorCode

from propius.flower.grid import PropiusGrid
from propius.specs import JobSpec

from .fakes import FakeNode, impostor


def spec(demand: int) -> JobSpec:
    return JobSpec.parse({"name": "grid-contract", "demand": demand, "over_selection": 1.0,
                          "aggregation": "collect", "task": {"executor": "flower-clientapp"}})


@contextlib.asynccontextmanager
async def grid_with(plane, *nodes: FakeNode) -> AsyncIterator[PropiusGrid]:
    async with contextlib.AsyncExitStack() as stack:
        for node in nodes:
            await stack.enter_async_context(node)
        grid = PropiusGrid(spec(len(nodes)), plane.address, partitions=len(nodes))
        await asyncio.to_thread(grid.__enter__)
        try:
            yield grid
        finally:
            await asyncio.to_thread(grid.__exit__, None, None, None)


def query(node_id: int) -> Message:
    return Message(RecordDict({"q": ConfigRecord({"x": 1})}), node_id, "query")


async def pull_until(grid: PropiusGrid, ids: list[str], count: int, timeout_s: float = 10.0) -> list[Message]:
    replies: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(replies) < count and time.monotonic() < deadline:
        replies += await asyncio.to_thread(grid.pull_messages, ids)
        await asyncio.sleep(0.05)
    return replies


async def test_message_ids_and_reply_matching(plane, flower_identity):
    nodes = [FakeNode(plane.address, f"echo-{i}") for i in range(3)]
    async with grid_with(plane, *nodes) as grid:
        node_ids = await asyncio.to_thread(grid.get_node_ids)
        assert sorted(node_ids) == sorted(n.node_id for n in nodes)  # the clients Propius bound
        messages = [query(n) for n in node_ids]
        ids = list(await asyncio.to_thread(grid.push_messages, messages))
        assert ids == [m.metadata.message_id for m in messages] == [m.object_id for m in messages]
        assert len(set(ids)) == 3
        replies = await pull_until(grid, ids, 3)
        by_message = {r.metadata.reply_to_message_id: r for r in replies}
        assert set(by_message) == set(ids)
        for message in messages:
            reply = by_message[message.metadata.message_id]
            assert reply.metadata.src_node_id == message.metadata.dst_node_id
            assert reply.content["echo"]["node"] == str(message.metadata.dst_node_id)
            assert reply.metadata.message_id == reply.object_id
        assert await asyncio.to_thread(grid.pull_messages, ids) == []  # a reply is pulled once


async def test_send_and_receive_returns_what_arrived_by_the_timeout(plane, flower_identity):
    nodes = [FakeNode(plane.address, "fast-0"), FakeNode(plane.address, "fast-1"),
             FakeNode(plane.address, "slow", mode="hold")]
    async with grid_with(plane, *nodes) as grid:
        node_ids = await asyncio.to_thread(grid.get_node_ids)
        began = time.monotonic()
        replies = await asyncio.to_thread(grid.send_and_receive, [query(n) for n in node_ids], timeout=1.5)
        assert 1.5 <= time.monotonic() - began < 5
        assert sorted(r.metadata.src_node_id for r in replies) == sorted(n.node_id for n in nodes[:2])
        assert not any(r.has_error() for r in replies)


async def test_unknown_replies_are_dropped_and_unreachable_nodes_get_errors(plane, flower_identity):
    honest, liar = FakeNode(plane.address, "honest"), FakeNode(plane.address, "liar", behaviour=impostor)
    async with grid_with(plane, honest, liar) as grid:
        await asyncio.to_thread(grid.get_node_ids)
        nowhere = query(12345)  # no client of this run has that node id
        messages = [query(honest.node_id), query(liar.node_id), nowhere]
        replies = await asyncio.to_thread(grid.send_and_receive, messages, timeout=20)
        by_message = {r.metadata.reply_to_message_id: r for r in replies}
        assert set(by_message) == {m.metadata.message_id for m in messages}  # nothing else came through
        assert by_message[messages[0].metadata.message_id].has_content()
        assert by_message[messages[1].metadata.message_id].error.code == ErrorCode.REPLY_MESSAGE_UNAVAILABLE
        assert by_message[nowhere.metadata.message_id].error.code == ErrorCode.NODE_UNAVAILABLE


async def test_a_node_that_disappears_mid_round_gets_an_error_reply(plane, flower_identity):
    nodes = [FakeNode(plane.address, "stays-0"), FakeNode(plane.address, "stays-1"),
             FakeNode(plane.address, "gone", mode="vanish")]
    async with grid_with(plane, *nodes) as grid:
        node_ids = await asyncio.to_thread(grid.get_node_ids)
        began = time.monotonic()
        messages = [query(n) for n in node_ids]
        replies = await asyncio.to_thread(grid.send_and_receive, messages, timeout=60)
        assert time.monotonic() - began < 10  # its lease (2 s) ran out; nobody waited for the timeout
        errors = [r for r in replies if r.has_error()]
        assert len(replies) == 3 and len(errors) == 1
        lost = next(m for m in messages if m.metadata.dst_node_id == nodes[2].node_id)
        assert errors[0].metadata.reply_to_message_id == lost.metadata.message_id
        assert errors[0].error.code == ErrorCode.NODE_UNAVAILABLE
        assert {r.metadata.src_node_id for r in replies if r.has_content()} == {n.node_id for n in nodes[:2]}

