"""Jittered waits, so thousands of devices that lost the server together do not return together."""

from __future__ import annotations

import random

__all__ = ["Backoff", "jittered"]


def jittered(seconds: float, rng: random.Random, fraction: float = 0.2) -> float:
    """``seconds`` scaled by a uniform factor in ``[1 - fraction, 1 + fraction]``."""
    return seconds * rng.uniform(1.0 - fraction, 1.0 + fraction)


class Backoff:
    """Exponential backoff with jitter: ``initial_s`` doubling up to ``cap_s``; :meth:`reset` on success."""

    def __init__(self, rng: random.Random, initial_s: float = 0.2, cap_s: float = 5.0) -> None:
        self._rng = rng
        self._initial_s = initial_s
        self._cap_s = cap_s
        self._next_s = initial_s

    def next(self) -> float:
        delay = jittered(self._next_s, self._rng)
        self._next_s = min(self._next_s * 2.0, self._cap_s)
        return delay

    def reset(self) -> None:
        self._next_s = self._initial_s
