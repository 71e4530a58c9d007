"""The wire format for tensors: safetensors bytes (a JSON header + raw little-endian buffers).

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

__all__ = ["PayloadError", "check_finite", "decode", "encode", "schema"]

class PayloadError(ValueError):
    """A payload is not a valid tensor dictionary; ``field`` names the request field it came in."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def encode(tensors: Mapping[str, np.ndarray]) -> bytes:
    # np.ascontiguousarray would turn a 0-d tensor into shape (1,): copy only what is not C-contiguous.
    return save({name: a if a.flags.c_contiguous else np.ascontiguousarray(a) for name, a in tensors.items()})


_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8,
}


def decode(data: bytes | bytearray | memoryview, *, max_bytes: int | None = None, field: str = "data"
           ) -> dict[str, np.ndarray]:
    """Parse safetensors bytes into arrays that view ``data`` (no copy of the tensor bytes).

    The safetensors library copies every tensor out of the buffer; an aggregator reading 100 MB updates
    cannot afford that, so we read the documented layout ourselves and check it as strictly: a JSON
    header of name -> {dtype, shape, data_offsets}, offsets contiguous, in order and inside the buffer.
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
    if header_len > size - 8 or header_len > 100 << 20:
        raise PayloadError(field, "safetensors header is longer than the payload")
    try:
        header = json.loads(bytes(view[8: 8 + header_len]))
    except (ValueError, UnicodeDecodeError):
        raise PayloadError(field, "safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise PayloadError(field, "safetensors header is not an object")
    header.pop("__metadata__", None)
    body = view[8 + header_len:]
    entries = []
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise PayloadError(field, f"tensor {name!r} has a malformed header entry") from None
        if _DTYPES.get(dtype) is None:
            raise PayloadError(field, f"tensor {name!r} has unsupported dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise PayloadError(field, f"tensor {name!r} has a malformed shape")
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= len(body)):
            raise PayloadError(field, f"tensor {name!r} points outside the payload")
        entries.append((begin, end, name, np.dtype(_DTYPES[dtype]).newbyteorder("<"), shape))
    if not entries:
        raise PayloadError(field, "payload holds no tensors")
    entries.sort()
    position = 0
    tensors = {}
    for begin, end, name, dtype, shape in entries:
        if begin != position or end - begin != dtype.itemsize * math.prod(shape):
            raise PayloadError(field, f"tensor {name!r} has inconsistent offsets")
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        position = end
    if position != len(body):
        raise PayloadError(field, "payload has trailing bytes")
    return tensors


def check_finite(tensors: Mapping[str, np.ndarray], field: str = "data") -> None:
    for name, array in tensors.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise PayloadError(field, f"tensor {name!r} holds NaN or infinite values")


def schema(tensors: Mapping[str, np.ndarray]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Name -> (dtype, shape): what two updates of the same model must agree on."""
    return {name: (array.dtype.str, tuple(array.shape)) for name, array in tensors.items()}
