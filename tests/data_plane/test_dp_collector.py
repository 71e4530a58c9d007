"""RoundCollector: every accepted update comes back whole, once, and bad ones leave no trace."""

from __future__ import annotations

import numpy as np
import pytest

from data_plane import RoundCollector, UpdateRejected
from data_plane.tensors import PayloadError, encode


async def test_each_update_is_kept_whole_and_once(raw_redis, namespace):
    collector = RoundCollector(raw_redis, namespace, 0, 0)
    reply = encode({"reply": np.frombuffer(b"flower bytes", np.uint8)})
    other = encode({"other": np.zeros(3, np.float32)})
    assert (await collector.add("a", reply, 1.0)).accepted
    assert (await collector.add("a", reply, 1.0)).duplicate
    assert (await collector.add("b", other, 2.0)).results == 2
    aggregate = await collector.finalize()
    assert aggregate.results == 2 and aggregate.tensors["a"].tobytes() == reply
    assert aggregate.tensors["b"].tobytes() == other
    assert await collector.finalize() is aggregate
    assert await raw_redis.smembers(f"{namespace}:r0:a0:accepted") == {b"a", b"b"}
    assert float(await raw_redis.hget(f"{namespace}:r0:a0:agg", "weight")) == 3.0


async def test_rejected_updates_are_not_claimed(raw_redis, namespace):
    collector = RoundCollector(raw_redis, namespace, 1, 0, max_update_bytes=1024)
    with pytest.raises(PayloadError):
        await collector.add("corrupt", b"\x00not safetensors", 1.0)
    with pytest.raises(PayloadError):
        await collector.add("big", encode({"w": np.zeros(4096, np.uint8)}), 1.0)
    with pytest.raises(UpdateRejected, match="num_samples"):
        await collector.add("nan", encode({"w": np.zeros(4, np.uint8)}), float("nan"))
    assert collector.results == 0 and not await raw_redis.exists(f"{namespace}:r1:a0:accepted")
    with pytest.raises(ValueError, match="no update"):
        await collector.finalize()


async def test_a_closed_or_discarded_round_takes_nothing(raw_redis, namespace):
    collector = RoundCollector(raw_redis, namespace, 2, 0)
    await collector.add("a", encode({"w": np.ones(2, np.uint8)}), 1.0)
    await collector.finalize()
    with pytest.raises(UpdateRejected, match="round"):
        await collector.add("late", encode({"w": np.ones(2, np.uint8)}), 1.0)
    discarded = RoundCollector(raw_redis, namespace, 3, 0)
    await discarded.add("a", encode({"w": np.ones(2, np.uint8)}), 1.0)
    await discarded.discard()
    assert not await raw_redis.exists(f"{namespace}:r3:a0:accepted", f"{namespace}:r3:a0:agg")
    with pytest.raises(UpdateRejected, match="round"):
        await discarded.add("b", encode({"w": np.ones(2, np.uint8)}), 1.0)
