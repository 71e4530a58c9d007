"""Long-lived ClientApp worker processes, one pool per app, shared by every device of a daemon.

A worker is keyed by its app directory, so two apps whose modules share a name (``task.py``) never
meet in one interpreter. A pool holds one worker per core, and each worker gets its share of the
cores as ``OMP_NUM_THREADS`` (unless set): what Ray gives a Flower simulation actor with
``num_cpus=1``, and what keeps small models from losing their time to thread contention. A worker
that dies is replaced on the next message; the message it was serving gets a Flower
``CLIENT_APP_CRASHED`` error reply, as a crashed ClientApp process would on a SuperNode. Only Flower's
own encodings (deflated objects, protobuf Contexts) cross the pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import cache

from flwr.app import Error, Message
from flwr.common.constant import ErrorCode

from clients.flower.codec import deflate_message, inflate_message, stamp_id
from clients.flower.framing import READY, Exchange, read_exchange, read_frames, write_exchange

__all__ = ["AppRef", "Worker", "WorkerPool", "worker_pool"]


@dataclass(frozen=True)
class AppRef:
    """Where a ClientApp lives on this machine: its project directory and ``module:attribute``."""

    app_dir: str
    clientapp: str


class Worker:
    """One worker process, one message at a time; it starts in the background (see :meth:`start`)."""

    def __init__(self, app: AppRef, threads: int = 1) -> None:
        self.app = app
        self._threads = threads
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def ready(self) -> bool:
        """Started and done loading the app: a message will not wait for an import."""
        return self._ready.is_set() and self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def start(self) -> None:
        """Spawn the process unless it runs; returns at once (a thread waits for its ``ready`` frame)."""
        with self._lock:
            self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            threads = str(self._threads)
            env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **os.environ, "PYTHONUNBUFFERED": "1"}
            self._ready.clear()
            self._process = subprocess.Popen(
                [sys.executable, "-m", "clients.flower.worker", self.app.app_dir, self.app.clientapp],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )
            threading.Thread(target=self._await_ready, args=(self._process,), daemon=True).start()
        return self._process

    def _await_ready(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        try:
            if read_frames(process.stdout, 1) == [READY]:
                self._ready.set()
        except EOFError:
            pass
        if not self._ready.is_set():
            process.kill()  # died or spoke out of turn while loading: the next message starts a new one

    def handle(self, request: Exchange) -> Exchange:
        """Run the ClientApp on one message; the reply and the Context to keep (empty: unchanged)."""
        with self._lock:
            process = self._spawn()
            assert process.stdin is not None and process.stdout is not None
            reply = None
            while not self._ready.wait(0.05) and process.poll() is None:
                pass
            if self._ready.is_set():
                try:
                    write_exchange(process.stdin, request)
                    reply = read_exchange(process.stdout)
                except (BrokenPipeError, EOFError):
                    reply = None
            if reply is None:
                process.kill()
                process.wait()
                return _crashed(request, process.returncode)
        return reply

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                assert self._process.stdin is not None
                self._process.stdin.close()
                try:
                    self._process.wait(5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()


def _crashed(request: Exchange, returncode: int | None) -> Exchange:
    """Flower's ``CLIENT_APP_CRASHED`` reply to the message a dead worker was serving."""
    message = inflate_message(request.message_id, request.objects)
    reason = f"ClientApp worker process exited with code {returncode}"
    reply = Message(Error(code=ErrorCode.CLIENT_APP_CRASHED, reason=reason), reply_to=message)
    return Exchange(stamp_id(reply), deflate_message(reply))


class WorkerPool:
    """``size`` workers per app, all started at once by :meth:`prepare` (a run's warm-up round), so that
    the run's rounds find them loaded. A message goes to a ready, free worker; when all are busy it queues
    on a ready one, in turn, and while none is ready, on the first, still loading."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._threads = max(1, (os.cpu_count() or 1) // self.size)
        self._workers: dict[AppRef, list[Worker]] = {}
        self._turn = 0
        self._lock = threading.Lock()

    def prepare(self, app: AppRef) -> None:
        """Have the workers of ``app`` start loading now, unless they are loading or loaded."""
        with self._lock:
            if self._workers.get(app):
                return  # a crashed worker restarts with its next message
            workers = [Worker(app, self._threads) for _ in range(self.size)]
            self._workers[app] = workers
        for worker in workers:
            worker.start()

    def worker(self, app: AppRef) -> Worker:
        self.prepare(app)
        with self._lock:
            workers = self._workers[app]
            ready = [w for w in workers if w.ready]
            free = [w for w in ready if not w.busy]
            if free:
                return free[0]
            if not ready:
                return workers[0]
            self._turn += 1
            return ready[self._turn % len(ready)]

    def close(self) -> None:
        with self._lock:
            workers = [w for pool in self._workers.values() for w in pool]
            self._workers.clear()
        for worker in workers:
            worker.close()


@cache
def worker_pool() -> WorkerPool:
    """The daemon process's pool: ``PROPIUS_FLOWER_WORKERS`` workers per app at most (default: one per core)."""
    return WorkerPool(int(os.environ.get("PROPIUS_FLOWER_WORKERS", os.cpu_count() or 1)))
