"""The wire format for tensors: safetensors bytes (a JSON header + raw little-endian buffers).

Documented, language-neutral and safe to parse: decoding never executes anything, unlike a pickle.
Every payload that crosses a process boundary goes through :func:`decode`, which turns any malformed
input into a :class:`PayloadError` naming the field, so a service answers INVALID_ARGUMENT instead of
crashing.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load, save

__all__ = ["PayloadError", "check_finite", "decode", "encode", "schema"]

_NUMERIC_KINDS = frozenset("biuf")


class PayloadError(ValueError):
    """A payload is not a valid tensor dictionary; ``field`` names the request field it came in."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def encode(tensors: Mapping[str, np.ndarray]) -> bytes:
    return save({name: np.ascontiguousarray(array) for name, array in tensors.items()})


def decode(data: bytes | bytearray | memoryview, *, max_bytes: int | None = None, field: str = "data"
           ) -> dict[str, np.ndarray]:
    size = len(data)
    if size == 0:
        raise PayloadError(field, "empty payload")
    if max_bytes is not None and size > max_bytes:
        raise PayloadError(field, f"payload of {size} bytes exceeds the limit of {max_bytes}")
    if size < 8:
        raise PayloadError(field, "truncated safetensors header")
    (header_len,) = struct.unpack("<Q", bytes(data[:8]))
    if header_len > size - 8:
        raise PayloadError(field, "safetensors header is longer than the payload")
    try:
        header = json.loads(bytes(data[8: 8 + header_len]))
        tensors = load(bytes(data))
    except (SafetensorError, ValueError, UnicodeDecodeError) as error:
        raise PayloadError(field, f"not a valid safetensors payload ({error})") from None
    if not isinstance(header, dict) or not tensors:
        raise PayloadError(field, "payload holds no tensors")
    for name, array in tensors.items():
        if array.dtype.kind not in _NUMERIC_KINDS:
            raise PayloadError(field, f"tensor {name!r} has non-numeric dtype {array.dtype}")
    return tensors


def check_finite(tensors: Mapping[str, np.ndarray], field: str = "data") -> None:
    for name, array in tensors.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise PayloadError(field, f"tensor {name!r} holds NaN or infinite values")


def schema(tensors: Mapping[str, np.ndarray]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Name -> (dtype, shape): what two updates of the same model must agree on."""
    return {name: (array.dtype.str, tuple(array.shape)) for name, array in tensors.items()}
