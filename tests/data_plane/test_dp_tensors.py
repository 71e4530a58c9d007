"""The tensor wire format: safetensors round trips; anything malformed is a PayloadError, never a crash."""

from __future__ import annotations

import contextlib
import json
import struct

import numpy as np
import pytest

from data_plane.tensors import PayloadError, check_finite, decode, encode, schema

DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
          np.uint64, np.uint32, np.uint16, np.uint8]


def _raw(header: object, body: bytes = b"") -> bytes:
    """A payload with a hand-written header, as a hostile or buggy client could send it."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_keeps_values_dtypes_and_shapes(dtype):
    rng = np.random.default_rng(1)
    tensors = {"matrix": (rng.normal(size=(3, 4)) * 10).astype(dtype), "vector": np.arange(5, dtype=dtype),
               "cube": np.ones((2, 1, 3), dtype), "scalar": np.ones((), dtype), "empty": np.zeros((0, 7), dtype)}
    back = decode(encode(tensors))
    assert schema(back) == schema(tensors)
    for name in tensors:
        np.testing.assert_array_equal(back[name], tensors[name])


def test_decode_views_the_payload_read_only():
    payload = bytearray(encode({"w": np.arange(4, dtype=np.float32)}))
    array = decode(payload)["w"]
    assert not array.flags.owndata and decode(memoryview(payload))["w"].tolist() == [0, 1, 2, 3]


def test_non_contiguous_and_scalar_inputs_are_encoded():
    array = np.arange(12, dtype=np.float32).reshape(3, 4).T
    back = decode(encode({"t": array, "s": np.float32(2.5)}))
    np.testing.assert_array_equal(back["t"], array)
    assert back["s"].shape == () and back["s"] == 2.5


def test_schema_names_dtype_and_shape():
    assert schema({"w": np.zeros((2, 3), np.float32), "n": np.zeros((), np.int64)}) == {
        "w": ("<f4", (2, 3)), "n": ("<i8", ())}


@pytest.mark.parametrize("payload", [
    b"", b"\x01", b"\xff" * 8, b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}", _raw([1, 2]), _raw({}),
    _raw({"__metadata__": {"k": "v"}}), _raw(b"[" * 100_000), _raw(b'{"a": "\xff\xfe"}'),
])
def test_garbage_is_rejected(payload):
    with pytest.raises(PayloadError) as error:
        decode(payload)
    assert error.value.field == "data"


HOSTILE = [None, True, 1.5, -1, 2**70, "x", "BOOL", "BF16", {}, [True], [-1], [2**70], [[1]], ["1"], [0, 4, 8]]


@pytest.mark.parametrize("key", ["dtype", "shape", "data_offsets"])
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_hostile_header_values_are_rejected(key, value):
    entry = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], key: value}
    with pytest.raises(PayloadError):
        decode(_raw({"a": entry}, b"\0" * 4))


@pytest.mark.parametrize("header, body", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, 8),  # trailing bytes
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1],
                                                                          "data_offsets": [4, 8]}}, 8),  # overlap
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8),  # gap
    ({"a": {"dtype": "F32", "shape": [0, 2**70], "data_offsets": [0, 0]}}, 0),  # empty but unholdable shape
    ({"a": {"dtype": "F32", "shape": [0] * 80, "data_offsets": [0, 0]}}, 0),  # beyond numpy's 64 dimensions
    ({"a": "F32"}, 0),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": []}}, 4),
])
def test_inconsistent_layouts_are_rejected(header, body):
    with pytest.raises(PayloadError):
        decode(_raw(header, b"\0" * body))


def test_random_bytes_and_truncations_never_crash():
    rng = np.random.default_rng(2)
    valid = encode({"w": rng.normal(size=100).astype(np.float32), "b": np.arange(3, dtype=np.int64)})
    for cut in range(len(valid)):
        with pytest.raises(PayloadError):
            decode(valid[:cut])
    for _ in range(300):
        blob = rng.integers(0, 256, size=int(rng.integers(1, 300)), dtype=np.uint8).tobytes()
        with pytest.raises(PayloadError):
            decode(blob)
    for _ in range(300):  # valid length prefix, corrupted header bytes
        corrupt = bytearray(valid)
        corrupt[int(rng.integers(8, len(valid)))] = int(rng.integers(0, 256))
        with contextlib.suppress(PayloadError):  # a flipped body byte is still a valid payload
            decode(corrupt)


def test_size_limit():
    payload = encode({"w": np.zeros(1000, np.float32)})
    assert decode(payload, max_bytes=len(payload))
    with pytest.raises(PayloadError, match="exceeds") as error:
        decode(payload, max_bytes=len(payload) - 1, field="model")
    assert error.value.field == "model"


def test_non_finite_values_are_flagged_only_by_check_finite():
    tensors = decode(encode({"w": np.array([1.0, np.nan], np.float32)}))  # parses
    check_finite({"w": np.ones(3, np.float32), "n": np.arange(3)})
    with pytest.raises(PayloadError, match="NaN"):
        check_finite(tensors)
    with pytest.raises(PayloadError):
        check_finite({"w": np.array([-np.inf], np.float64)})
    late = np.zeros(3 << 20, np.float16)
    late[-1] = np.inf
    with pytest.raises(PayloadError):
        check_finite({"w": late})
