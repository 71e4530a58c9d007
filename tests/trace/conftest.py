"""A small hand-made CCL-Bench data point, written without Propius' exporter, for the validator and metrics.

Four ranks (0 = aggregator, 1..3 = slots), five steps. Step s starts at S = 10 000·s µs and lasts
9000, 8000, 6000, 7000, 9000 µs. Steps 0 and 4 (dropped by the metrics) hold one long rank-0 broadcast
only. In steps 1..3, with times relative to S:

    rank 0  broadcast_model_publish [0, 1000)       fedavg_fold_update [4000, 4500)
    rank 1  broadcast_model_fetch [1000, 2000)      local_training [2000, 4000)   sendrecv_update_upload [3500, 4500)
    rank 2  broadcast_model_fetch [1000, 1500)      local_training [1500, 5500)   sendrecv_update_upload [5500, 6000)
            in step 3 instead:                      local_training [1500, 3500)   sendrecv_update_upload [3500, 4000)
    rank 3  broadcast_model_fetch [1000, 2000)      local_training [2000, 3000)   sendrecv_update_upload [3000, 3500)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

NAME = "mlp-fl-cpu-t0"
STEP_DURATIONS = (9000, 8000, 6000, 7000, 9000)


def _x(rank: int, tid: int, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": rank, "tid": tid, "ts": ts, "dur": dur,
            "args": {"synthetic_kernel": True, **args}}


def _comm(rank: int, name: str, start: int, end: int) -> dict[str, Any]:
    return _x(rank, 2, name, start, end - start, transport="grpc", bytes=2976)


def _compute(rank: int, name: str, start: int, end: int) -> dict[str, Any]:
    return _x(rank, 1, name, start, end - start)


def _work(rank: int, step: int) -> list[dict[str, Any]]:
    s = 10_000 * step
    if step in (0, 4):
        return [_comm(0, "broadcast_model_publish", s, s + 9000)] if rank == 0 else []
    if rank == 0:
        return [_comm(0, "broadcast_model_publish", s, s + 1000), _compute(0, "fedavg_fold_update", s + 4000, s + 4500)]
    if rank == 1:
        return [_comm(1, "broadcast_model_fetch", s + 1000, s + 2000),
                _compute(1, "local_training", s + 2000, s + 4000),
                _comm(1, "sendrecv_update_upload", s + 3500, s + 4500)]
    if rank == 2:
        train_end = s + (3500 if step == 3 else 5500)
        return [_comm(2, "broadcast_model_fetch", s + 1000, s + 1500),
                _compute(2, "local_training", s + 1500, train_end),
                _comm(2, "sendrecv_update_upload", train_end, train_end + 500)]
    return [_comm(3, "broadcast_model_fetch", s + 1000, s + 2000), _compute(3, "local_training", s + 2000, s + 3000),
            _comm(3, "sendrecv_update_upload", s + 3000, s + 3500)]


def rank_document(rank: int) -> dict[str, Any]:
    events = []
    for step, duration in enumerate(STEP_DURATIONS):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": rank, "tid": 0,
                       "ts": 10_000 * step, "dur": duration, "args": {}})
        events += _work(rank, step)
    return {"traceEvents": events}


CARD: dict[str, Any] = {
    "version": 1,
    "description": "A hand-made FL data point for tests.",
    "hf_url": None,
    "trace_url": None,
    "contributor": "tests",
    "contact": "tests@example.org",
    "workload": {
        "model": {"phase": "training", "moe": False, "granularity": "fl_round", "model_family": "mlp",
                  "precision": "fp32", "epochs": 1, "iteration": 5},
        "data": {"batch_size": 960, "seq_len": None, "dataset": "synthetic"},
        "hardware": {
            "network_topo": {"topology": "star", "bandwidth_gbps": [None, None]},
            "xpu_spec": {"type": "cpu", "model": "client-device", "total_count": 3, "count_per_node": 1},
            "driver_version": None,
        },
    },
    "Model-executor": {
        "framework": {"name": "propius", "compiler_tool_selection": "plain_pytorch"},
        "model_plan_parallelization": {"dp_replicate": 3, "dp_shard": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1,
                                       "pp_mb": 1},
        "communication_library": {"name": "grpc", "version": "1.66", "env": None},
        "protocol_selection": ["tcp"],
    },
    "metric_source": {"traces": ["json"], "metrics_specific_trace": []},
    "collection_notes": {"algorithm": "fedavg", "server_rank": 0},
}


class HandMade:
    """The data point's folder plus helpers to break it one way at a time."""

    def __init__(self, root: Path, name: str = NAME) -> None:
        self.folder = root / name
        self.folder.mkdir(parents=True)
        self.save_card(json.loads(json.dumps(CARD)))
        for rank in range(4):
            self.save_rank(rank, rank_document(rank))
        script = self.folder / "run.sh"
        script.write_text("#!/usr/bin/env bash\npropius submit job.yaml --wait\n")
        os.chmod(script, 0o755)

    @property
    def card_path(self) -> Path:
        return self.folder / f"{self.folder.name}.yaml"

    def card(self) -> dict[str, Any]:
        return yaml.safe_load(self.card_path.read_text())

    def save_card(self, card: dict[str, Any]) -> None:
        self.card_path.write_text(yaml.safe_dump(card, sort_keys=False))

    def rank(self, rank: int) -> dict[str, Any]:
        return json.loads((self.folder / f"rank{rank}_trace.json").read_text())

    def save_rank(self, rank: int, document: dict[str, Any]) -> None:
        (self.folder / f"rank{rank}_trace.json").write_text(json.dumps(document))


@pytest.fixture
def handmade(tmp_path: Path) -> HandMade:
    return HandMade(tmp_path)


@pytest.fixture
def handmade_named(tmp_path: Path):
    """A factory for the same data point under another folder name."""
    return lambda name: HandMade(tmp_path, name)
