"""Hot, TTL'd soft state in plain Redis: rounds, offers, bindings, leases, sessions, client registry.

Everything that must not race (binding a client to a round, dropping an expired lease, counting a
result) is one Lua script over keys of a single job, so it is atomic and Redis Cluster safe (all keys
carry the job's hash tag). Nothing here needs a Redis module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from typing import Any

import redis.asyncio as aioredis

from control_plane.events import Event
from control_plane.redis_client import AnyRedis
from control_plane.redis_pipe import ScriptedPipe
from control_plane.scheduling.state import ROUND_FIELDS, RoundState
from data_plane.claims import accepted_key
from propius.keys import client_key, global_key, job_key
from propius.specs import ClientProfile

__all__ = ["BindOutcome", "HotState", "token_hash"]


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class BindOutcome:
    bound: bool
    reason: str
    deadline_at: float = 0.0
    model_digest: str = ""
    event: Event | None = None  # a bind's ``client_bound`` event as published, with the round's new bound count



# One round trip per Accept: check the offer (made to this client, in this session), bind atomically and
# publish the event with the new bound count (also returned, so the shard applies the bind at once).
# KEYS: round hash, offer, members, leases.
# ARGV: client, round, attempt, now, lease_s, session hash, events channel, the event (JSON, without its
# bound count), keep_ms (TTL of the sets)
# An offer is one string key with a TTL: the JSON array [client, round, attempt, session hash].
_BIND = """
local raw = redis.call('GET', KEYS[2])
if not raw then return {0, 'offer_expired'} end
local off = cjson.decode(raw)
if off[1] ~= ARGV[1] or off[2] ~= ARGV[2] or off[3] ~= ARGV[3] then return {0, 'offer_not_yours'} end
if off[4] ~= ARGV[6] then return {-1, 'session'} end
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state', 'target', 'bound', 'deadline_at', 'model_digest')
if r[3] ~= 'open' or r[1] ~= ARGV[2] or r[2] ~= ARGV[3] or tonumber(r[6]) < tonumber(ARGV[4]) then
  return {0, 'round_closed'}
end
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return {0, 'already_bound'} end
if tonumber(r[5]) >= tonumber(r[4]) then return {0, 'round_full'} end
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
local bound = redis.call('HINCRBY', KEYS[1], 'bound', 1)
redis.call('ZADD', KEYS[4], tonumber(ARGV[4]) + tonumber(ARGV[5]), ARGV[1])
redis.call('PEXPIRE', KEYS[4], ARGV[9])
redis.call('DEL', KEYS[2])
local event = cjson.decode(ARGV[8])
event['bound'] = bound
redis.call('PUBLISH', ARGV[7], cjson.encode(event))
return {1, 'bound', r[6], r[7], bound}
"""

# Free the slot of clients that are bound but have not delivered (lease expiry or release).
# KEYS: round hash, members, leases. ARGV: round, attempt, client... Returns {bound after or -1, freed client...}.
_UNBIND = """
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then return 0 end
local reply = {-1}
for i = 3, #ARGV do
  if redis.call('ZREM', KEYS[3], ARGV[i]) == 1 then
    redis.call('SREM', KEYS[2], ARGV[i])
    reply[#reply + 1] = ARGV[i]
  end
end
if #reply > 1 and r[3] == 'open' then reply[1] = redis.call('HINCRBY', KEYS[1], 'bound', 1 - #reply) end
return reply
"""

# KEYS: round hash, leases. ARGV: round, attempt, client, new_deadline. A pinned lease (+inf) stays pinned.
_HEARTBEAT = """
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] ~= 'open' then return 0 end
local score = redis.call('ZSCORE', KEYS[2], ARGV[3])
if not score then return 0 end
if score ~= 'inf' then redis.call('ZADD', KEYS[2], 'XX', ARGV[4], ARGV[3]) end
return 1
"""

# An update is being kept: its lease can no longer expire (score +inf), so the reaper cannot free the slot
# of a client whose update counts. KEYS: round hash, leases, accepted set. ARGV: round, attempt, client.
# Returns 1 pinned, 2 already accepted (a retry: the claim answers duplicate), 0 no lease (lost or never).
_PIN = """
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] ~= 'open' then return 0 end
if redis.call('SISMEMBER', KEYS[3], ARGV[3]) == 1 then return 2 end
if not redis.call('ZSCORE', KEYS[2], ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[2], 'XX', 'inf', ARGV[3])
return 1
"""

# A delivered result: the lease ends, the slot stays taken. KEYS: round hash, leases. ARGV: round, attempt, client
_DELIVERED = """
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] ~= 'open' then return -1 end
redis.call('ZREM', KEYS[2], ARGV[3])
return redis.call('HINCRBY', KEYS[1], 'results', 1)
"""

# KEYS: round hash. ARGV: round, attempt, new state, closed_at, aggregate digest
_FINISH = """
local r = redis.call('HMGET', KEYS[1], 'round', 'attempt', 'state')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] ~= 'open' then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'closed_at', ARGV[4], 'aggregate_digest', ARGV[5])
return 1
"""


class HotState:
    """Typed access to the Redis keys of the control plane (see :mod:`propius.keys`)."""

    def __init__(self, redis: AnyRedis, prefix: str, keep_s: float = 86400.0,
                 pipe: ScriptedPipe | None = None) -> None:
        self.redis = redis
        # The binding hot path (check-in writes, bind) goes through the lean pipe when there is one.
        self._pipe = pipe
        self._bind_sha = pipe.script(_BIND) if pipe is not None else ""
        self.prefix = prefix
        self._keep_ms = int(keep_s * 1000)  # per-round keys outlive their round by this much, then expire
        self._bind = redis.register_script(_BIND)
        self._unbind = redis.register_script(_UNBIND)
        self._heartbeat = redis.register_script(_HEARTBEAT)
        self._delivered = redis.register_script(_DELIVERED)
        self._finish = redis.register_script(_FINISH)
        self._pin = redis.register_script(_PIN)

    # ---------------------------------------------------------------- keys

    def namespace(self, job_id: str) -> str:
        """Key prefix of everything one job owns (the data plane stores its blobs under it too)."""
        return job_key(self.prefix, job_id)

    def _round_key(self, job_id: str) -> str:
        return job_key(self.prefix, job_id, "round")

    def _members_key(self, job_id: str, round_: int, attempt: int) -> str:
        return job_key(self.prefix, job_id, f"r{round_}", f"a{attempt}", "members")

    def _leases_key(self, job_id: str, round_: int, attempt: int) -> str:
        return job_key(self.prefix, job_id, f"r{round_}", f"a{attempt}", "leases")

    def _offer_key(self, job_id: str, offer_id: str) -> str:
        return job_key(self.prefix, job_id, "offer", offer_id)

    @property
    def events_channel(self) -> str:
        return global_key(self.prefix, "events")

    # ---------------------------------------------------------------- rounds

    async def open_round(self, state: RoundState) -> None:
        """Store ``state`` as the job's current round, replacing the previous one."""
        key = self._round_key(state.job_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=state.to_hash())
            await pipe.execute()

    async def round(self, job_id: str) -> RoundState | None:
        return RoundState.from_hash(job_id, await self.redis.hgetall(self._round_key(job_id)))

    async def rounds(self, job_ids: list[str]) -> dict[str, RoundState]:
        """Current rounds of many jobs in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hmget(self._round_key(job_id), ROUND_FIELDS)
            rows = await pipe.execute()
        result = {}
        for job_id, values in zip(job_ids, rows, strict=True):
            if values[0] is None:
                continue
            data = {k: v for k, v in zip(ROUND_FIELDS, values, strict=True) if v is not None}
            state = RoundState.from_hash(job_id, data)
            if state is not None:
                result[job_id] = state
        return result

    async def set_model_digest(self, job_id: str, digest: str) -> None:
        await self.redis.hset(self._round_key(job_id), "model_digest", digest)

    async def finish_round(self, job_id: str, round_: int, attempt: int, state: str, aggregate_digest: str) -> bool:
        """Move an open round to closed/failed; False if it was not the open one (someone else won)."""
        done = await self._finish(
            keys=[self._round_key(job_id)], args=[round_, attempt, state, time.time(), aggregate_digest]
        )
        return bool(done)

    async def members(self, job_id: str, round_: int, attempt: int) -> set[str]:
        return set(await self.redis.smembers(self._members_key(job_id, round_, attempt)))

    async def is_member(self, job_id: str, round_: int, attempt: int, client_id: str) -> bool:
        return bool(await self.redis.sismember(self._members_key(job_id, round_, attempt), client_id))

    async def has_lease(self, job_id: str, round_: int, attempt: int, client_id: str) -> bool:
        return await self.redis.zscore(self._leases_key(job_id, round_, attempt), client_id) is not None

    # ---------------------------------------------------------------- offers and binding

    async def check_in(
        self, profile: ClientProfile, now: float, session_ttl_s: float, offers: list[tuple[str, RoundState]],
        offer_ttl_s: float,
    ) -> str:
        """Record the check-in, open a new session and store its offers, in one round trip.

        Returns the session token; offers remember the session, so Accept can check both at once.
        """
        token = secrets.token_urlsafe(24)
        session = token_hash(token)
        offer_ms = int(offer_ttl_s * 1000)
        commands: list[tuple[Any, ...]] = [
            ("ZADD", global_key(self.prefix, "clients", "seen"), now, profile.client_id),
            ("HSET", global_key(self.prefix, "clients", "profiles"), profile.client_id, profile.model_dump_json()),
            ("SET", client_key(self.prefix, profile.client_id, "session"), session, "PX", int(session_ttl_s * 1000)),
        ]
        for offer_id, state in offers:
            value = json.dumps([profile.client_id, str(state.round), str(state.attempt), session], ensure_ascii=False)
            commands.append(("SET", self._offer_key(state.job_id, offer_id), value, "PX", offer_ms))
        await self._execute_many(commands)
        return token

    async def bind(
        self, job_id: str, offer_id: str, client_id: str, round_: int, attempt: int, lease_s: float, token: str,
        origin: str = "", passed_over: str = "",
    ) -> BindOutcome:
        """Bind atomically and publish the ``client_bound`` event, marked with ``origin`` (the binding shard's
        bus, which applies the returned event itself rather than waiting for pub/sub) and naming the job the
        bind ``passed_over`` (:mod:`control_plane.scheduling.fifo_lag`)."""
        keys = [
            self._round_key(job_id), self._offer_key(job_id, offer_id),
            self._members_key(job_id, round_, attempt), self._leases_key(job_id, round_, attempt),
        ]
        now = time.time()
        event = Event("client_bound", job_id, round_, attempt, client_id, at=now, origin=origin,
                      passed_over=passed_over)
        args = [client_id, round_, attempt, now, lease_s, token_hash(token), self.events_channel, event.to_json(),
                self._keep_ms]
        if self._pipe is not None:
            reply = await self._pipe.evalsha(self._bind_sha, keys, args)
        else:
            reply = await self._bind(keys=keys, args=args)
        if int(reply[0]) == -1:
            raise PermissionError("the offer was made in another session")
        if int(reply[0]) == 0:
            return BindOutcome(False, reply[1])
        return BindOutcome(True, reply[1], float(reply[2]), reply[3] or "", replace(event, bound=int(reply[4])))

    async def heartbeat(self, job_id: str, round_: int, attempt: int, client_id: str, lease_s: float,
                        session_ttl_s: float) -> bool:
        """Extend the client's lease on the round (False: it holds none) and its session, in one round trip.

        The session lives as long as the client heartbeats: a task longer than ``session_ttl_s`` keeps
        its binding, which is lost only by a missed lease, the round's end or a release.
        """
        keys = [self._round_key(job_id), self._leases_key(job_id, round_, attempt)]
        args = [round_, attempt, client_id, time.time() + lease_s]
        session_key, session_ms = client_key(self.prefix, client_id, "session"), int(session_ttl_s * 1000)
        if isinstance(self.redis, aioredis.RedisCluster):
            # A cluster pipeline does not load a script that a node lacks (a replica promoted since): two calls.
            alive, _ = await asyncio.gather(self._heartbeat(keys=keys, args=args),
                                            self.redis.pexpire(session_key, session_ms))
            return bool(alive)
        async with self.redis.pipeline(transaction=False) as pipe:
            await self._heartbeat(keys=keys, args=args, client=pipe)
            pipe.pexpire(session_key, session_ms)
            alive, _ = await pipe.execute()
        return bool(alive)

    async def unbind(self, job_id: str, round_: int, attempt: int, client_ids: list[str]) -> tuple[list[str], int]:
        """Free the slots of clients that hold a lease: (the clients freed, bound count after, or -1)."""
        if not client_ids:
            return [], -1
        reply = await self._unbind(
            keys=[
                self._round_key(job_id), self._members_key(job_id, round_, attempt),
                self._leases_key(job_id, round_, attempt),
            ],
            args=[round_, attempt, *client_ids],
        )
        if not isinstance(reply, list):  # the round moved on
            return [], -1
        return [str(client) for client in reply[1:]], int(reply[0])

    async def leased(self, job_id: str, round_: int, attempt: int) -> list[str]:
        """The clients holding a lease in the attempt: bound and not yet delivered or dropped."""
        return list(await self.redis.zrange(self._leases_key(job_id, round_, attempt), 0, -1))

    async def bound_clients(self, states: Iterable[RoundState]) -> dict[str, str]:
        """client id -> the job whose open round (among ``states``) it holds a lease in (is working for)."""
        bound: dict[str, str] = {}
        for state in states:
            if state.state == "open":
                for client_id in await self.leased(state.job_id, state.round, state.attempt):
                    bound[client_id] = state.job_id
        return bound

    async def expired_leases(self, job_id: str, round_: int, attempt: int, now: float) -> list[str]:
        return list(await self.redis.zrangebyscore(self._leases_key(job_id, round_, attempt), "-inf", now))

    async def pin_lease(self, job_id: str, round_: int, attempt: int, client_id: str) -> bool:
        """Keep the client's lease from expiring while its update is kept; False when it holds none (and its
        update was not accepted before)."""
        keys = [self._round_key(job_id), self._leases_key(job_id, round_, attempt),
                accepted_key(self.namespace(job_id), round_, attempt)]
        return bool(await self._pin(keys=keys, args=[round_, attempt, client_id]))

    async def mark_delivered(self, job_id: str, round_: int, attempt: int, client_id: str) -> int:
        """Count a delivered result; returns the round's result count, or -1 if the round moved on."""
        return int(
            await self._delivered(
                keys=[self._round_key(job_id), self._leases_key(job_id, round_, attempt)],
                args=[round_, attempt, client_id],
            )
        )

    async def _execute_many(self, commands: list[tuple[Any, ...]]) -> None:
        """Run commands in one round trip (not a transaction); raise the first error."""
        if self._pipe is not None:
            replies = await self._pipe.execute_many(commands)
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                replies = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply

    # ---------------------------------------------------------------- sessions and clients

    async def session_valid(self, client_id: str, token: str) -> bool:
        stored = await self.redis.get(client_key(self.prefix, client_id, "session"))
        return stored is not None and secrets.compare_digest(stored, token_hash(token))

    async def recent_profiles_raw(self, since: float, chunk: int = 500) -> AsyncIterator[list[tuple[str, str]]]:
        """(client_id, profile JSON) of the clients seen since ``since``, ``chunk`` at a time, so that a
        large population is read in slices between which the event loop serves requests."""
        seen_key = global_key(self.prefix, "clients", "seen")
        profiles_key = global_key(self.prefix, "clients", "profiles")
        offset = 0
        while True:
            ids = await self.redis.zrangebyscore(seen_key, since, "+inf", start=offset, num=chunk)
            if not ids:
                return
            raw = await self.redis.hmget(profiles_key, ids)
            yield [(client_id, text) for client_id, text in zip(ids, raw, strict=True) if text is not None]
            if len(ids) < chunk:
                return
            offset += chunk

    async def forget_clients_before(self, since: float, chunk: int = 2000) -> None:
        """Drop the registry entries of clients not seen since ``since`` (a slice at a time)."""
        seen_key = global_key(self.prefix, "clients", "seen")
        profiles_key = global_key(self.prefix, "clients", "profiles")
        while stale := await self.redis.zrangebyscore(seen_key, "-inf", f"({since}", start=0, num=chunk):
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zrem(seen_key, *stale)
                pipe.hdel(profiles_key, *stale)
                await pipe.execute()
            if len(stale) < chunk:
                return

    async def recent_clients(self, since: float) -> list[tuple[ClientProfile, float]]:
        """(profile, last seen) of the clients seen since ``since``; a read, it forgets no one."""
        seen_key = global_key(self.prefix, "clients", "seen")
        profiles_key = global_key(self.prefix, "clients", "profiles")
        rows = await self.redis.zrangebyscore(seen_key, since, "+inf", withscores=True)
        if not rows:
            return []
        raw = await self.redis.hmget(profiles_key, [client for client, _ in rows])
        recent = []
        for (_, seen), text in zip(rows, raw, strict=True):
            if text is not None:
                try:
                    recent.append((ClientProfile.model_validate_json(text), seen))
                except ValueError:  # stored by another version: not listed rather than failing the listing
                    continue
        return recent

    # ---------------------------------------------------------------- events and cleanup

    async def expire_job(self, job_id: str, ttl_s: float) -> None:
        """A finished job's keys go away after ``ttl_s`` (results stay readable until then)."""
        pattern = self.namespace(job_id) + ":*"
        async for key in self.redis.scan_iter(match=pattern, count=500):
            await self.redis.pexpire(key, int(ttl_s * 1000))
