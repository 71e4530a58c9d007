"""Prometheus metrics of one control-plane process (``Settings.metrics_port`` exposes them over HTTP, and so
does the dashboard's port at ``/metrics``).

Each ControlPlane has its own registry, so several planes in one process (tests, shards) never clash.
Label values an outsider chooses are bounded: the per-class queue gauges name at most
``MAX_CLASS_LABELS`` eligibility classes (those with the most free slots) and sum the rest as ``other``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from control_plane.scheduling.class_queues import ClassQueue

__all__ = ["MAX_CLASS_LABELS", "Metrics", "class_label"]

MAX_CLASS_LABELS = 20
_MAX_LABEL_CHARS = 80
# FL rounds take seconds to hours: buckets from a tenth of a second to two hours.
_ROUND_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


def class_label(key: str) -> str:
    """An eligibility class as a label value: its constraints' JSON, shortened (with a digest to keep it
    unique) when long."""
    if len(key) <= _MAX_LABEL_CHARS:
        return key
    return f"{key[:_MAX_LABEL_CHARS - 13]}…{hashlib.sha256(key.encode()).hexdigest()[:12]}"


class _ClassQueues(Collector):
    """The per-class queue gauges, from the last queues the scheduler tick stored (a scrape runs in the
    exporter's thread and must not touch the event loop's state)."""

    _GAUGES = (("supply", "Recent clients the class admits"),
               ("open_rounds", "Open rounds of the class"),
               ("waiting_jobs", "Open rounds of the class with a free slot"),
               ("open_slots", "Free bind slots in the class's open rounds"),
               ("waiting_clients", "Clients long-polling for an offer that the class admits"))

    def __init__(self) -> None:
        self.queues: Sequence[ClassQueue] = ()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = list(self.queues)
        shown, rest = queues[:MAX_CLASS_LABELS], queues[MAX_CLASS_LABELS:]
        for field, doc in self._GAUGES:
            family = GaugeMetricFamily(f"propius_class_{field}", f"{doc}, per eligibility class", labels=["class"])
            for queue in shown:
                family.add_metric([class_label(queue.key)], getattr(queue, field))
            if rest:
                family.add_metric(["other"], sum(getattr(queue, field) for queue in rest))
            yield family


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
        self.schedule_seconds = Histogram(
            "propius_schedule_seconds", "Round scheduling delay: from its opening to its demand-th bind",
            buckets=_ROUND_BUCKETS, registry=self.registry)
        self.round_seconds = Histogram("propius_round_seconds", "Round duration: from its opening to its end, "
                                       "by how it ended", ["state"], buckets=_ROUND_BUCKETS, registry=self.registry)
        self._queues = _ClassQueues()
        self.registry.register(self._queues)

    def set_queues(self, queues: Sequence[ClassQueue]) -> None:
        """The classes' queues as the scheduler last saw them (largest first: the labelled ones)."""
        self._queues.queues = tuple(queues)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        start_http_server(port, addr=host, registry=self.registry)
