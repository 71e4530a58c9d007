"""The tensor wire format: safetensors round trips; anything malformed is a PayloadError, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

from data_plane.tensors import PayloadError, check_finite, decode, encode, schema


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int8, np.uint8])
def test_round_trip_keeps_values_dtypes_and_shapes(dtype):
    rng = np.random.default_rng(1)
    tensors = {"a": (rng.normal(size=(3, 4)) * 10).astype(dtype), "b": np.arange(5, dtype=dtype),
               "s": np.ones((), dtype)}
    back = decode(encode(tensors))
    assert schema(back) == schema(tensors)
    for name in tensors:
        np.testing.assert_array_equal(back[name], tensors[name])


def test_non_contiguous_input_is_encoded():
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(decode(encode({"t": array}))["t"], array)


@pytest.mark.parametrize("payload", [b"", b"\x01", b"\xff" * 8, b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}"])
def test_garbage_is_rejected(payload):
    with pytest.raises(PayloadError) as error:
        decode(payload)
    assert error.value.field == "data"


def test_random_bytes_and_truncations_never_crash():
    rng = np.random.default_rng(2)
    valid = encode({"w": rng.normal(size=100).astype(np.float32)})
    for cut in range(0, len(valid) - 1, 37):
        with pytest.raises(PayloadError):
            decode(valid[:cut])
    for _ in range(200):
        blob = rng.integers(0, 256, size=int(rng.integers(1, 300)), dtype=np.uint8).tobytes()
        with pytest.raises(PayloadError):
            decode(blob)


def test_size_limit():
    payload = encode({"w": np.zeros(1000, np.float32)})
    assert decode(payload, max_bytes=len(payload))
    with pytest.raises(PayloadError, match="exceeds"):
        decode(payload, max_bytes=len(payload) - 1)


def test_non_finite_values_are_flagged():
    check_finite({"w": np.ones(3, np.float32)})
    with pytest.raises(PayloadError, match="NaN"):
        check_finite({"w": np.array([1.0, np.nan], np.float32)})
    with pytest.raises(PayloadError):
        check_finite({"w": np.array([np.inf], np.float64)})
