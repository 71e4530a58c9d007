"""Token buckets per caller (API key, device, peer address), in this process.

Alone, they bound what a caller gets from one shard; in front of the shared buckets in Redis
(:mod:`control_plane.shared_rate_limit`) they refuse, without a round trip, callers whose shared bucket
must be empty too. The bucket table is bounded (least recently used dropped), so outsiders cannot make
it grow; a dropped bucket comes back full.
"""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ["RateLimiter"]


class RateLimiter:
    def __init__(self, rate_per_s: float, burst: int, max_buckets: int) -> None:
        self.rate_per_s = rate_per_s
        self._burst = float(burst)
        self._max = max_buckets
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def _level(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - at) * self.rate_per_s)

    def take(self, key: str, now: float | None = None) -> float:
        """Spend one token of ``key``'s bucket: 0.0 when there was one, else the seconds until there is."""
        now = time.monotonic() if now is None else now
        tokens = self._level(key, now)
        if tokens < 1.0:
            return (1.0 - tokens) / self.rate_per_s
        self._buckets[key] = (tokens - 1.0, now)
        self._buckets.move_to_end(key)
        if len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return 0.0

    def wait_s(self, key: str, now: float | None = None) -> float:
        """Seconds until ``key`` has a token (0.0: it has one now), spending nothing."""
        now = time.monotonic() if now is None else now
        tokens = self._level(key, now)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate_per_s
