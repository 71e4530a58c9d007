"""Streaming weighted FedAvg: exact against numpy, idempotent, and rejects without side effects."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from data_plane.aggregator import AggregateFailed, RoundAggregator, UpdateRejected
from data_plane.tensors import PayloadError, encode
from propius.specs import MAX_NUM_SAMPLES


def _updates(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"w": rng.normal(size=(600, 500)).astype(np.float32), "b": rng.normal(size=5).astype(np.float32),
             "d": rng.normal(size=(2, 3)), "steps": np.array(i * 7, np.int64)} for i in range(n)]


async def _members(raw_redis, namespace, round_: int) -> set[bytes]:
    return await raw_redis.smembers(f"{namespace}:r{round_}:a0:accepted")


async def test_weighted_mean_matches_numpy(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 0, 0)
    updates, weights = _updates(7), [3.0, 1.0, 10.0, 250.0, 0.5, 42.0, 7]
    for i, (update, weight) in enumerate(zip(updates, weights, strict=True)):
        metrics = {"loss": float(i), **({"accuracy": 0.5} if i % 2 else {})}
        result = await aggregator.add(f"c{i}", encode(update), weight, metrics)
        assert result.accepted and not result.duplicate and result.results == i + 1 == aggregator.results
    aggregate = await aggregator.finalize()
    assert aggregate.results == 7 and aggregate.total_weight == pytest.approx(sum(weights))
    for name in ("w", "b", "d", "steps"):
        expected = np.average(np.stack([u[name] for u in updates]), axis=0, weights=weights)
        assert aggregate.tensors[name].dtype == updates[0][name].dtype
        np.testing.assert_allclose(aggregate.tensors[name], np.rint(expected) if name == "steps" else expected,
                                   rtol=1e-6, atol=1e-7)
    assert aggregate.metrics == pytest.approx({"loss": np.average(range(7), weights=weights), "accuracy": 0.5})
    assert await raw_redis.scard(f"{namespace}:r0:a0:accepted") == 7
    assert float(await raw_redis.hget(f"{namespace}:r0:a0:agg", "weight")) == pytest.approx(sum(weights))
    assert await aggregator.finalize() is aggregate


async def test_duplicates_count_once_even_when_racing(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 1, 0)
    update = encode(_updates(1)[0])
    first = await aggregator.add("same", update, 5.0)
    again = await aggregator.add("same", update, 5.0)
    assert first.accepted and not again.accepted and again.duplicate and again.results == 1
    racing = await asyncio.gather(*(aggregator.add("racer", update, 2.0) for _ in range(8)))
    assert sum(r.accepted for r in racing) == 1 and sum(r.duplicate for r in racing) == 7
    aggregate = await aggregator.finalize()
    assert aggregate.results == 2 and aggregate.total_weight == 7.0
    assert await _members(raw_redis, namespace, 1) == {b"same", b"racer"}


async def test_rejects_leave_no_trace(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 2, 0, max_update_bytes=2 << 20)
    good = _updates(2)
    await aggregator.add("ok", encode(good[0]), 2.0, {"loss": 1.0})
    bad_payloads = {
        "shape": {**good[1], "b": np.zeros(4, np.float32)},
        "dtype": {**good[1], "b": good[1]["b"].astype(np.float64)},
        "missing": {k: v for k, v in good[1].items() if k != "b"},
        "extra": {**good[1], "x": np.zeros(1, np.float32)},
    }
    for client, tensors in bad_payloads.items():
        with pytest.raises(UpdateRejected, match="schema") as error:
            await aggregator.add(client, encode(tensors), 1.0)
        assert error.value.field == "data"
    for weight in (float("nan"), float("inf"), 0.0, -1.0, "3", None, True):
        with pytest.raises(UpdateRejected) as error:
            await aggregator.add("weight", encode(good[1]), weight)
        assert error.value.field == "num_samples"
    with pytest.raises(UpdateRejected) as error:
        await aggregator.add("metrics", encode(good[1]), 1.0, {"loss": "low"})
    assert error.value.field == "metrics_json"
    with pytest.raises(PayloadError):
        await aggregator.add("nan", encode({**good[1], "b": np.full(5, np.nan, np.float32)}), 1.0)
    with pytest.raises(PayloadError):
        await aggregator.add("junk", b"junk-bytes-not-a-model", 1.0)
    with pytest.raises(PayloadError, match="exceeds"):
        await aggregator.add("big", encode({**good[1], "w": np.zeros((1000, 1000), np.float32)}), 1.0)
    assert aggregator.results == 1 and await _members(raw_redis, namespace, 2) == {b"ok"}
    # A rejected client may still deliver a valid update; a NaN metric is dropped, not averaged.
    assert (await aggregator.add("shape", encode(good[1]), 2.0, {"loss": float("nan")})).accepted
    aggregate = await aggregator.finalize()
    np.testing.assert_allclose(aggregate.tensors["w"], (good[0]["w"] + good[1]["w"]) / 2, rtol=1e-6)
    assert aggregate.metrics == {"loss": 1.0} and aggregate.total_weight == 4.0


async def test_reference_schema_closed_round_and_discard(raw_redis, namespace):
    update = _updates(1)[0]
    reference = {"w": ("<f4", (600, 500)), "b": ("<f4", (4,)), "d": ("<f8", (2, 3)), "steps": ("<i8", ())}
    aggregator = RoundAggregator(raw_redis, namespace, 3, 0, reference_schema=reference)
    with pytest.raises(UpdateRejected, match="schema"):
        await aggregator.add("c", encode(update), 1.0)
    aggregator.reference_schema = None
    await aggregator.add("c", encode(update), 1.0)
    await aggregator.finalize()
    with pytest.raises(UpdateRejected) as error:
        await aggregator.add("late", encode(update), 1.0)
    assert error.value.field == "round" and error.value.reason == "round closed"
    with pytest.raises(ValueError, match="no update"):
        await RoundAggregator(raw_redis, namespace, 4, 0).finalize()
    await aggregator.discard()
    assert await raw_redis.exists(f"{namespace}:r3:a0:accepted", f"{namespace}:r3:a0:agg") == 0


async def test_failed_fold_releases_the_claim(raw_redis, namespace, monkeypatch):
    aggregator = RoundAggregator(raw_redis, namespace, 5, 0)
    fold = aggregator._fold

    def broken(tensors, weight):
        monkeypatch.setattr(aggregator, "_fold", fold)
        raise MemoryError("out of memory")

    monkeypatch.setattr(aggregator, "_fold", broken)
    with pytest.raises(MemoryError):
        await aggregator.add("c", encode(_updates(1)[0]), 1.0)
    assert aggregator.results == 0 and await _members(raw_redis, namespace, 5) == set()
    assert (await aggregator.add("c", encode(_updates(1)[0]), 1.0)).accepted


async def test_cancelled_caller_still_counts_a_claimed_update(raw_redis, namespace, monkeypatch, wait_for):
    aggregator = RoundAggregator(raw_redis, namespace, 6, 0)
    fold = aggregator._fold
    release = threading.Event()  # the fold runs only once the caller is cancelled: the commit is in flight
    monkeypatch.setattr(aggregator, "_fold", lambda t, w: (release.wait(10.0), fold(t, w))[1])
    task = asyncio.create_task(aggregator.add("c", encode(_updates(1)[0]), 3.0))

    async def claimed() -> bool:
        return bool(await _members(raw_redis, namespace, 6))

    await wait_for(claimed, what="the update's claim")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    aggregate = await aggregator.finalize()  # waits for the commit in flight
    assert aggregate.results == 1 and aggregate.total_weight == 3.0


async def test_weights_at_the_cap_fold_without_overflow(raw_redis, namespace):
    """Weights are folded as fractions of the largest so far: weights up to the num_samples cap on
    values whose weighted sum would overflow float64 still give the exact, finite mean."""
    aggregator = RoundAggregator(raw_redis, namespace, 0, 0)
    updates = [{"d": np.full(3, value), "f": np.full(2, value / 1e270, np.float32)} for value in (1e296, 2e296, 4e296)]
    weights = [1.0, MAX_NUM_SAMPLES, MAX_NUM_SAMPLES / 2]  # growing, then smaller: the sums are rescaled once
    for i, (update, weight) in enumerate(zip(updates, weights, strict=True)):
        assert (await aggregator.add(f"c{i}", encode(update), weight, {"loss": 1e300 * (i + 1)})).accepted
    aggregate = await aggregator.finalize()
    for name in ("d", "f"):
        stacked = np.stack([u[name].astype(np.float64) for u in updates])
        expected = np.average(stacked, axis=0, weights=np.array(weights) / MAX_NUM_SAMPLES)  # numpy's own overflows
        np.testing.assert_allclose(aggregate.tensors[name], expected, rtol=1e-6)
    assert aggregate.total_weight == pytest.approx(sum(weights))
    assert aggregate.metrics["loss"] == pytest.approx(np.average([1e300, 2e300, 3e300],
                                                                           weights=np.array(weights) / MAX_NUM_SAMPLES))


async def test_a_weight_above_the_cap_is_rejected_without_trace(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 0, 0)
    for weight in (1.5e308, MAX_NUM_SAMPLES * 1.01):
        with pytest.raises(UpdateRejected) as info:
            await aggregator.add("big", encode({"w": np.ones(2, np.float32)}), weight)
        assert info.value.field == "num_samples"
    assert aggregator.results == 0 and not await _members(raw_redis, namespace, 0)


async def test_a_mean_that_overflows_fails_instead_of_closing_with_inf(raw_redis, namespace):
    aggregator = RoundAggregator(raw_redis, namespace, 0, 0)
    for i in range(2):  # each value finite, their sum is not
        assert (await aggregator.add(f"c{i}", encode({"d": np.full(2, 1.5e308)}), 1.0)).accepted
    with pytest.raises(AggregateFailed, match="not finite"):
        await aggregator.finalize()
    with pytest.raises(UpdateRejected):  # the round is over
        await aggregator.add("late", encode({"d": np.ones(2)}), 1.0)
