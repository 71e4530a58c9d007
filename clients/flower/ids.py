"""Flower node ids of Propius clients.

Flower addresses nodes by unsigned 64-bit integers; Propius names clients by strings. Hashing the
name gives every process the same id without a lookup table, so the ServerApp (which addresses nodes)
and a client daemon (which answers as one) agree by construction.
"""

from __future__ import annotations

import hashlib

__all__ = ["node_id_for"]


def node_id_for(client_id: str) -> int:
    """The Flower node id of a Propius client (stable across rounds, runs and restarts)."""
    return int.from_bytes(hashlib.sha256(f"propius-node:{client_id}".encode()).digest()[:8], "big")
