"""Prometheus metrics of one control-plane process (``Settings.metrics_port`` exposes them over HTTP).

Each ControlPlane has its own registry, so several planes in one process (tests, shards) never clash.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.check_ins = Counter("propius_check_ins", "Client check-ins", ["outcome"], registry=self.registry)
        self.accepts = Counter("propius_accepts", "Accepts of offers, by outcome", ["outcome"], registry=self.registry)
        self.updates = Counter("propius_updates", "Uploaded updates, by outcome", ["outcome"], registry=self.registry)
        self.rounds = Counter("propius_rounds", "Finished rounds, by state", ["state"], registry=self.registry)
        self.dropouts = Counter("propius_dropouts", "Bindings freed by lease expiry", registry=self.registry)
        self.waiting = Gauge("propius_waiting_clients", "Clients long-polling for an offer", registry=self.registry)
        self.update_bytes = Counter("propius_update_bytes", "Bytes of accepted updates", registry=self.registry)
        self.fold_seconds = Histogram("propius_fold_seconds", "Time to validate and fold one update",
                                      registry=self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        start_http_server(port, addr=host, registry=self.registry)
