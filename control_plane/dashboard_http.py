"""The dashboard's HTTP port: the page, its JSON (``/api/state``) and the Prometheus metrics (``/metrics``).

Stdlib ``http.server`` in one thread, serving one request at a time with a short socket timeout: the
port answers reads only (GET), so a slow or idle connection holds at most that thread for
``_TIMEOUT_S`` and no outsider can make it open more. The JSON is built on the control plane's event
loop (:class:`~control_plane.dashboard_state.DashboardSource`), which the handler waits on.

It shows job names, owners and client counts, so it binds to ``Settings.host`` (loopback by default);
with ``Settings.dashboard_token`` set, ``/api/state`` and ``/metrics`` require
``Authorization: Bearer <token>`` (the page itself holds no data and is served to anyone who reaches it).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources

__all__ = ["DashboardServer"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 5.0
_PAGE = resources.files("control_plane").joinpath("static/dashboard.html")
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                               "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
}


class _Server(HTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("dashboard: a request from %s failed", client_address, exc_info=True)  # e.g. the peer left


class DashboardServer:
    """Serves the dashboard on ``host:port`` (0: a free port, see :attr:`port`) from a daemon thread."""

    def __init__(self, host: str, port: int, token: str, state_json: Callable[[], Awaitable[bytes]],
                 metrics_text: Callable[[], bytes], loop: asyncio.AbstractEventLoop) -> None:
        page = _PAGE.read_bytes()
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = _TIMEOUT_S
            server_version = "propius-dashboard"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    self._send(HTTPStatus.OK, "text/html; charset=utf-8", page)
                elif path not in ("/api/state", "/metrics"):
                    self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")
                elif not server.authorized(self.headers.get("Authorization", "")):
                    self._send(HTTPStatus.UNAUTHORIZED, "text/plain", b"a bearer token is required\n",
                               {"WWW-Authenticate": "Bearer"})
                elif path == "/metrics":
                    self._send(HTTPStatus.OK, "text/plain; version=0.0.4; charset=utf-8", metrics_text())
                else:
                    try:
                        body = asyncio.run_coroutine_threadsafe(state_json(), loop).result(_TIMEOUT_S)
                    except Exception:  # noqa: BLE001 - a backend outage: say so, keep serving
                        log.warning("dashboard state unavailable", exc_info=True)
                        self._send(HTTPStatus.SERVICE_UNAVAILABLE, "text/plain", b"state unavailable; retry\n")
                        return
                    self._send(HTTPStatus.OK, "application/json", body)

            def _send(self, status: HTTPStatus, kind: str, body: bytes, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {**_HEADERS, "Content-Type": kind, "Content-Length": str(len(body)),
                                    **(extra or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
                log.debug("dashboard: " + format, *args)

        self._token = token.encode()
        try:
            self._http = _Server((host, port), Handler)
        except OSError as error:
            raise OSError(error.errno, f"cannot serve the dashboard on {host}:{port}: {error.strerror}") from None
        self.port: int = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, name="propius-dashboard", daemon=True)

    def authorized(self, header: str) -> bool:
        if not self._token:
            return True
        scheme, _, credential = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode(), self._token)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._http.shutdown()
            self._thread.join(timeout=_TIMEOUT_S + 1)
        self._http.server_close()
