"""Which control-plane shard serves each job's open round, and which shards are alive.

A round's aggregate lives in the memory of the shard that opened it (:mod:`control_plane.rounds`), so
when that shard dies another must take the round over. Each shard renews a liveness key every tick, and
a job's ``owner`` key names the shard that serves its round. A shard that has not renewed its key for
``ttl_s`` (killed, hung, cut off) is dead: a live shard claims each of its rounds with one
compare-and-set on the job's owner key (a single key, so one slot of a Redis Cluster), and exactly one
shard wins each round.
"""

from __future__ import annotations

from control_plane.redis_client import AnyRedis
from propius.keys import global_key, job_key

__all__ = ["ShardRegistry"]

# KEYS: the job's owner key. ARGV: the owner seen (empty: none), the claimant, keep_ms.
_CLAIM = """
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""


class ShardRegistry:
    def __init__(self, redis: AnyRedis, prefix: str, shard_id: str, *, ttl_s: float, keep_s: float) -> None:
        self._redis = redis
        self._prefix = prefix
        self.shard_id = shard_id
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._keep_ms = max(1, int(keep_s * 1000))
        self._claim = redis.register_script(_CLAIM)

    def _alive_key(self, shard_id: str) -> str:
        return global_key(self._prefix, "shard", shard_id)

    def _owner_key(self, job_id: str) -> str:
        return job_key(self._prefix, job_id, "owner")

    async def heartbeat(self) -> None:
        """This shard is alive for ``ttl_s`` more."""
        await self._redis.set(self._alive_key(self.shard_id), "1", px=self._ttl_ms)

    async def retire(self) -> None:
        """This shard stops (gracefully): its rounds are free to take over at once."""
        await self._redis.delete(self._alive_key(self.shard_id))

    async def own(self, job_id: str) -> None:
        """This shard serves the job's round from now on (it opened it)."""
        await self._redis.set(self._owner_key(job_id), self.shard_id, px=self._keep_ms)

    async def owns(self, job_id: str) -> bool:
        return await self._redis.get(self._owner_key(job_id)) == self.shard_id

    async def orphans(self, job_ids: list[str]) -> dict[str, str]:
        """Of these jobs, those whose owner is dead (or unknown: ""), by that owner; two round trips."""
        if not job_ids:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.get(self._owner_key(job_id))
            owners = dict(zip(job_ids, [owner or "" for owner in await pipe.execute()], strict=True))
        others = sorted({owner for owner in owners.values() if owner and owner != self.shard_id})
        async with self._redis.pipeline(transaction=False) as pipe:
            for owner in others:
                pipe.exists(self._alive_key(owner))
            alive = {owner for owner, live in zip(others, await pipe.execute(), strict=True) if live}
        return {job_id: owner for job_id, owner in owners.items() if owner != self.shard_id and owner not in alive}

    async def claim(self, job_id: str, previous: str) -> bool:
        """Take the job's round over from ``previous`` (as :meth:`orphans` named it); False when another
        shard took it first."""
        return bool(await self._claim(keys=[self._owner_key(job_id)], args=[previous, self.shard_id, self._keep_ms]))
