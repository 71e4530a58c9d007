"""The CCL-Bench data-point format: file names, step markers and how events are told apart.

Everything that reads or writes a data point goes through these names, so the exporter, the
validator and the metrics can never disagree on what a rank file, a step or a transfer is.
"""

from __future__ import annotations

import re

__all__ = [
    "COMM_TOKENS",
    "RANK_FILE",
    "RUN_SCRIPT",
    "STEP_CATEGORY",
    "WORK_CATEGORY",
    "card_file",
    "data_point_name",
    "is_communication",
    "rank_file",
    "sanitize_name",
    "step_name",
    "step_number",
]

COMM_TOKENS = (
    "nccl", "broadcast", "sendrecv", "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter",
    "reduce_scatter", "alltoall", "all_to_all", "send", "recv", "p2p", "cross_device", "cross-device",
    "communicate", "collective",
)
"""Substrings that make an event communication, case-insensitive. The toolkit classifies kernels by name
alone, with the union of these tokens across its tools; a name without one counts as compute."""

STEP_CATEGORY = "user_annotation"
WORK_CATEGORY = "kernel"
"""The toolkit reads only ``kernel`` events as work; annotations and CPU-side events are not work."""

RUN_SCRIPT = "run.sh"
RANK_FILE = re.compile(r"^rank(0|[1-9][0-9]*)_trace\.json$")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_COMM = re.compile("|".join(re.escape(token) for token in COMM_TOKENS), re.IGNORECASE)
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def is_communication(name: str) -> bool:
    return bool(_COMM.search(name))


def step_name(round_: int) -> str:
    return f"ProfilerStep#{round_}"


def step_number(name: str) -> int | None:
    """The step of a ``ProfilerStep#<n>`` name, else None."""
    match = _STEP.match(name)
    return int(match.group(1)) if match else None


def rank_file(rank: int) -> str:
    return f"rank{rank}_trace.json"


def card_file(name: str) -> str:
    return f"{name}.yaml"


def sanitize_name(name: str) -> str:
    """A folder name from a job name: lowercase ``[a-z0-9_-]``, never containing ``tpu``.

    Toolkit tools treat a data point whose name contains ``tpu`` as a TPU trace, so ``tpu`` (as in
    "output") is split to ``t-pu``; the split cannot form a new ``tpu`` with its neighbours.
    """
    safe = _UNSAFE.sub("-", name.lower()).strip("-") or "job"
    return safe.replace("tpu", "t-pu")


def data_point_name(*, model: str, demand: int, job: str, platform: str = "cpu", group: str = "propius") -> str:
    """The folder name, after CCL-Bench's convention ``<model>-<framework+parallelism>-<platform>-<group>``
    (``deepseek-llama-8b-Deepspeed-Zero_3-DP_4-Perlmutter-group_13``): ``<model>-propius-dp<demand>-<job>-
    <platform>-<group>``, the job's name in the place other contributors put a run's configuration (``batch128``)
    so that two jobs never share a folder. Each part is :func:`sanitize_name`'d."""
    parts = (model, "propius", f"dp{demand}", job, platform, group)
    return "-".join(sanitize_name(part) for part in parts)
