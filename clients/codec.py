"""Tensor payloads on the wire: safetensors bytes, never pickles.

The data plane's codec is the reference (it also validates payloads); the client falls back to
plain safetensors, the same format, where the data plane package is not importable.
"""

from __future__ import annotations

try:
    from data_plane.tensors import decode, encode
except ImportError:
    from safetensors.numpy import load as decode
    from safetensors.numpy import save as encode

__all__ = ["decode", "encode"]
