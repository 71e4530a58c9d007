"""Streaming weighted FedAvg: exact against numpy, idempotent, and rejects without side effects."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from data_plane.aggregator import RoundAggregator, UpdateRejected
from data_plane.tensors import PayloadError, encode


def _updates(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"w": rng.normal(size=(6, 5)).astype(np.float32), "b": rng.normal(size=5).astype(np.float32)}
            for _ in range(n)]


async def test_weighted_mean_matches_numpy(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 0, 0)
    updates, weights = _updates(7), [3.0, 1.0, 10.0, 250.0, 0.5, 42.0, 7.0]
    for i, (update, weight) in enumerate(zip(updates, weights, strict=True)):
        result = await aggregator.add(f"c{i}", encode(update), weight, {"loss": float(i)})
        assert result.accepted and result.results == i + 1
    aggregate = await aggregator.finalize()
    assert aggregate.results == 7 and aggregate.total_weight == pytest.approx(sum(weights))
    for name in ("w", "b"):
        expected = np.average(np.stack([u[name] for u in updates]), axis=0, weights=weights)
        np.testing.assert_allclose(aggregate.tensors[name], expected, rtol=1e-6, atol=1e-7)
        assert aggregate.tensors[name].dtype == np.float32
    assert aggregate.metrics["loss"] == pytest.approx(np.average(range(7), weights=weights))
    assert int(await raw_redis.scard(f"{namespace}:r0:a0:accepted")) == 7


async def test_duplicates_count_once_even_when_racing(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 1, 0)
    update = encode(_updates(1)[0])
    first = await aggregator.add("same", update, 5.0)
    again = await aggregator.add("same", update, 5.0)
    assert first.accepted and not again.accepted and again.duplicate
    racing = await asyncio.gather(*(aggregator.add("racer", update, 2.0) for _ in range(8)))
    assert sum(r.accepted for r in racing) == 1 and sum(r.duplicate for r in racing) == 7
    aggregate = await aggregator.finalize()
    assert aggregate.results == 2 and aggregate.total_weight == 7.0


async def test_rejects_leave_no_trace(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 2, 0)
    good = _updates(2)
    await aggregator.add("ok", encode(good[0]), 1.0)
    bad_shape = {"w": np.zeros((5, 5), np.float32), "b": np.zeros(5, np.float32)}
    with pytest.raises(UpdateRejected, match="schema") as error:
        await aggregator.add("shape", encode(bad_shape), 1.0)
    assert error.value.field == "data"
    with pytest.raises(UpdateRejected) as error:
        await aggregator.add("weight", encode(good[1]), float("nan"))
    assert error.value.field == "num_samples"
    with pytest.raises(UpdateRejected):
        await aggregator.add("weight", encode(good[1]), 0.0)
    nan = {**good[1], "b": np.full(5, np.nan, np.float32)}
    with pytest.raises(PayloadError):
        await aggregator.add("nan", encode(nan), 1.0)
    with pytest.raises(PayloadError):
        await aggregator.add("junk", b"junk-bytes-not-a-model", 1.0)
    assert aggregator.results == 1
    assert await raw_redis.smembers(f"{namespace}:r2:a0:accepted") == {b"ok"}
    # the same clients may still deliver a valid update afterwards
    assert (await aggregator.add("shape", encode(good[1]), 1.0)).accepted


async def test_reference_schema_and_closed_round(raw_redis, namespace):
    update = _updates(1)[0]
    reference = {"w": ("<f4", (6, 5)), "b": ("<f4", (4,))}
    aggregator = RoundAggregator(raw_redis, namespace, 3, 0, reference_schema=reference)
    with pytest.raises(UpdateRejected, match="schema"):
        await aggregator.add("c", encode(update), 1.0)
    aggregator.reference_schema = None
    await aggregator.add("c", encode(update), 1.0)
    await aggregator.finalize()
    with pytest.raises(UpdateRejected) as error:
        await aggregator.add("late", encode(update), 1.0)
    assert error.value.field == "round"
    with pytest.raises(ValueError):
        await RoundAggregator(raw_redis, namespace, 4, 0).finalize()
    await aggregator.discard()
    assert await raw_redis.exists(f"{namespace}:r3:a0:accepted") == 0
