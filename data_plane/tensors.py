"""The wire format for tensors: safetensors bytes (an 8-byte length, a JSON header, raw little-endian buffers).

Documented, language-neutral and safe to parse: decoding never executes anything, unlike a pickle.
Every payload that crosses a process boundary goes through :func:`decode`, which turns any malformed
input into a :class:`PayloadError` naming the field, so a service answers INVALID_ARGUMENT instead of
crashing.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping

import numpy as np
from safetensors.numpy import save

__all__ = ["PayloadError", "Schema", "check_finite", "decode", "encode", "schema"]

Schema = dict[str, tuple[str, tuple[int, ...]]]

# Numeric safetensors dtypes numpy can view without conversion (BF16 and BOOL are refused: not averageable).
_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(code).newbyteorder("<")
    for name, code in {
        "F64": "f8", "F32": "f4", "F16": "f2", "I64": "i8", "I32": "i4", "I16": "i2", "I8": "i1",
        "U64": "u8", "U32": "u4", "U16": "u2", "U8": "u1",
    }.items()
}
_MAX_HEADER = 100 << 20  # the safetensors library's own limit
_FINITE_BLOCK = 1 << 20  # elements per isfinite() call: a small, cache-resident bool temporary


class PayloadError(ValueError):
    """A payload is not a valid tensor dictionary; ``field`` names the request field it came in."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def encode(tensors: Mapping[str, np.ndarray]) -> bytes:
    """safetensors bytes of ``tensors``; numpy scalars become 0-d tensors, strided views are copied."""
    arrays = {name: np.asarray(a) for name, a in tensors.items()}
    # np.ascontiguousarray would turn a 0-d tensor into shape (1,): copy only what is not C-contiguous.
    return save({name: a if a.flags.c_contiguous else np.ascontiguousarray(a) for name, a in arrays.items()})


def decode(data: bytes | bytearray | memoryview, *, max_bytes: int | None = None, field: str = "data"
           ) -> dict[str, np.ndarray]:
    """Parse safetensors bytes into read-only arrays that view ``data`` (no copy of the tensor bytes).

    The safetensors library copies every tensor out of the buffer; an aggregator reading 100 MB updates
    cannot afford that, so we read the documented layout ourselves and check it as strictly: a JSON
    header of name -> {dtype, shape, data_offsets}, the tensors tiling the body exactly, in order.
    """
    view = memoryview(data).cast("B")
    size = len(view)
    if size == 0:
        raise PayloadError(field, "empty payload")
    if max_bytes is not None and size > max_bytes:
        raise PayloadError(field, f"payload of {size} bytes exceeds the limit of {max_bytes}")
    if size < 8:
        raise PayloadError(field, "truncated safetensors header")
    (header_len,) = struct.unpack("<Q", view[:8])
    if header_len > size - 8 or header_len > _MAX_HEADER:
        raise PayloadError(field, "safetensors header is longer than the payload")
    try:
        header = json.loads(bytes(view[8: 8 + header_len]))
    except (ValueError, RecursionError):  # RecursionError: deeply nested JSON
        raise PayloadError(field, "safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise PayloadError(field, "safetensors header is not an object")
    header.pop("__metadata__", None)
    if not header:
        raise PayloadError(field, "payload holds no tensors")
    body = view[8 + header_len:]
    entries = sorted(_entry(field, name, entry, len(body)) for name, entry in header.items())
    tensors = {}
    position = 0
    for begin, end, name, dtype, shape in entries:
        if begin != position or end - begin != dtype.itemsize * math.prod(shape):
            raise PayloadError(field, f"tensor {name!r} has inconsistent offsets")
        try:
            tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        except ValueError:  # an empty tensor may still claim more than numpy's 64 dimensions or 2**63 rows
            raise PayloadError(field, f"tensor {name!r} has a shape numpy cannot hold") from None
        position = end
    if position != len(body):
        raise PayloadError(field, "payload has trailing bytes")
    return tensors


def _entry(field: str, name: str, entry: object, body: int) -> tuple[int, int, str, np.dtype, tuple[int, ...]]:
    """One header entry, checked for types: JSON may hold anything (lists for strings, booleans for ints)."""
    if not (isinstance(entry, dict) and entry.keys() >= {"dtype", "shape", "data_offsets"}):
        raise PayloadError(field, f"tensor {name!r} has a malformed header entry")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise PayloadError(field, f"tensor {name!r} has unsupported dtype {dtype!r}")
    if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
        raise PayloadError(field, f"tensor {name!r} has a malformed shape")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1] <= body):
        raise PayloadError(field, f"tensor {name!r} points outside the payload")
    return offsets[0], offsets[1], name, _DTYPES[dtype], tuple(shape)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_finite(tensors: Mapping[str, np.ndarray], field: str = "data") -> None:
    """Refuse NaN and infinities: one such value would poison every coordinate it is averaged into."""
    for name, array in tensors.items():
        if array.dtype.kind != "f":
            continue
        flat = array.reshape(-1)
        for start in range(0, flat.size, _FINITE_BLOCK):
            if not np.isfinite(flat[start: start + _FINITE_BLOCK]).all():
                raise PayloadError(field, f"tensor {name!r} holds NaN or infinite values")


def schema(tensors: Mapping[str, np.ndarray]) -> Schema:
    """Name -> (dtype, shape): what two updates of the same model must agree on."""
    return {name: (array.dtype.str, tuple(array.shape)) for name, array in tensors.items()}
