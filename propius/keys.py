"""Redis key layout shared by the control and data planes.

Every key that one job owns carries the hash tag ``{job:<id>}``, so a job's keys live in one Redis
Cluster slot and a Lua script may touch them together; client keys carry ``{client:<id>}``, and a rate
limit's bucket ``{rate:<limiter>:<id>}``.
Only plain Redis commands are used: no modules.
"""

from __future__ import annotations

__all__ = ["client_key", "global_key", "job_key", "rate_key"]


def job_key(prefix: str, job_id: str, *parts: object) -> str:
    return ":".join([prefix, "{job:" + job_id + "}", *map(str, parts)])


def client_key(prefix: str, client_id: str, *parts: object) -> str:
    return ":".join([prefix, "{client:" + client_id + "}", *map(str, parts)])


def global_key(prefix: str, *parts: object) -> str:
    return ":".join([prefix, *map(str, parts)])


def rate_key(prefix: str, limiter: str, ident: str) -> str:
    """The token bucket of ``ident`` (an API key id, a client id, a peer address) in ``limiter``."""
    return ":".join([prefix, "{rate:" + limiter + ":" + ident + "}"])
