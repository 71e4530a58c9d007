"""Jobs as CCL-Bench data points: export (``export``), metrics (``metrics``) and the validator (``check``).

A data point is a folder ``<name>/`` with one workload card ``<name>.yaml``, one Kineto-style Chrome trace
per rank ``rank<N>_trace.json`` and ``run.sh``; docs/ccl-bench.md describes the mapping of FL rounds onto
ranks. The export reads the durable store, so it is imported on first use: reading and checking a data
point needs neither the store nor the control plane.
"""

from __future__ import annotations

from typing import Any

from propius.trace.check import Problem, check_data_point
from propius.trace.datapoint import DataPoint, load_data_point
from propius.trace.metrics import TraceMetrics, compute_metrics

__all__ = [
    "DataPoint",
    "Problem",
    "TraceMetrics",
    "check_data_point",
    "compute_metrics",
    "data_point_exporter",
    "export_job",
    "load_data_point",
    "try_export_job",
]


def __getattr__(name: str) -> Any:
    if name in ("data_point_exporter", "export_job", "try_export_job"):
        from propius.trace import export

        return getattr(export, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
