"""Token buckets in Redis, shared by every control-plane shard: one atomic script per check.

A caller whose calls reach N shards gets its rate once, not N times. Each bucket is one hash (its own
slot on a Redis Cluster) whose TTL is the time it takes to refill: a bucket that expired was full, so
expiry changes nothing and the keys stay bounded by the callers active in that window. Time is Redis's
(``TIME``), so shards with skewed clocks agree.

This process keeps a bucket of the same rate in front: every token the shared bucket gives through this
shard is also taken from the local one, and both refill alike, so the local bucket never holds fewer
tokens than the shared one. When the local bucket is empty the shared one is too, and the call is
refused without a round trip (a flood costs Redis nothing once its bucket is drained here); the wait
it names is then a lower bound, and the next refusal, from Redis, names the exact one.
"""

from __future__ import annotations

import math

from control_plane.rate_limit import RateLimiter
from control_plane.redis_client import AnyRedis
from control_plane.redis_pipe import ScriptedPipe
from propius.keys import rate_key

__all__ = ["SharedRateLimiter"]

# KEYS: the bucket (hash: t = tokens, at = when). ARGV: rate per s, burst, cost (0: only look), TTL ms.
# Returns the seconds until a token is there, "0" when there was one (and, with cost 1, it was taken).
_TAKE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rate, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens = burst
if b[1] then tokens = math.min(burst, tonumber(b[1]) + math.max(0, now - tonumber(b[2])) * rate) end
if tokens < 1 then return tostring((1 - tokens) / rate) end
if cost > 0 then
  redis.call('HSET', KEYS[1], 't', tostring(tokens - cost), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return '0'
"""


class SharedRateLimiter:
    """The buckets of one limiter (``name``: "key", "device", "failures") in Redis under ``prefix``; with
    ``redis`` None, this process's buckets alone (``Settings.shared_rate_limits`` off: one shard)."""

    def __init__(self, redis: AnyRedis | None, pipe: ScriptedPipe | None, prefix: str, name: str,
                 rate_per_s: float, burst: int, max_buckets: int) -> None:
        self.rate_per_s = rate_per_s
        self._local = RateLimiter(rate_per_s, burst, max_buckets)
        self._key = lambda ident: rate_key(prefix, name, ident)
        self._args = (rate_per_s, burst, math.ceil(burst / rate_per_s * 1000) + 1000)  # TTL: refilled, and 1 s
        self._pipe = pipe if redis is not None else None
        self._sha = self._pipe.script(_TAKE) if self._pipe is not None else ""
        self._script = redis.register_script(_TAKE) if redis is not None else None

    async def take(self, ident: str) -> float:
        """Spend one token of ``ident``'s bucket: 0.0 when there was one, else the seconds until there is."""
        if self._script is None or self._local.wait_s(ident):  # this process decides: alone, or a refusal
            return self._local.take(ident)
        wait_s = await self._shared(ident, 1)
        if not wait_s:
            self._local.take(ident)
        return wait_s

    async def wait_s(self, ident: str) -> float:
        """Seconds until ``ident`` has a token (0.0: it has one now), spending nothing."""
        local_s = self._local.wait_s(ident)
        if self._script is None or local_s:
            return local_s
        return await self._shared(ident, 0)

    async def _shared(self, ident: str, cost: int) -> float:
        assert self._script is not None
        keys = [self._key(ident)]
        rate, burst, ttl_ms = self._args
        args = [rate, burst, cost, ttl_ms]
        reply = await (self._pipe.evalsha(self._sha, keys, args) if self._pipe is not None
                       else self._script(keys=keys, args=args))
        return float(reply)
