"""PNG plots of simulation results (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from propius.simulator.metrics import RunMetrics  # noqa: E402

__all__ = ["plot_jct", "plot_run"]


def plot_run(metrics: RunMetrics, path: Path) -> Path:
    """One run: each job's JCT, and its failed rounds."""
    names = [job.name for job in metrics.jobs]
    jcts = [job.jct_s or 0.0 for job in metrics.jobs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    left.bar(names, jcts)
    left.set_ylabel("JCT (s)")
    jct = "n/a" if metrics.avg_jct_s is None else f"{metrics.avg_jct_s:,.0f} s"
    left.set_title(f"{metrics.policy}: avg JCT {jct}, {metrics.unfinished} unfinished")
    right.bar(names, [job.failed_rounds for job in metrics.jobs], color="tab:red")
    right.set_ylabel("failed rounds")
    right.set_title(f"utilization {metrics.utilization:.3f}, {metrics.binds_per_s:.2f} binds/s")
    for axis in (left, right):
        axis.tick_params(axis="x", rotation=90)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_jct(rows: Sequence[RunMetrics], path: Path, title: str) -> Path:
    """Average JCT per policy label, one bar group per seed."""
    labels = list(dict.fromkeys(row.policy for row in rows))
    seeds = sorted({row.seed for row in rows})
    fig, axis = plt.subplots(figsize=(max(6, len(labels) * 0.9), 4))
    width = 0.8 / max(len(seeds), 1)
    for i, seed in enumerate(seeds):
        by_label = {row.policy: row.avg_jct_s for row in rows if row.seed == seed}
        axis.bar([x + i * width for x in range(len(labels))], [by_label.get(label, 0.0) for label in labels],
                 width, label=f"seed {seed}")
    axis.set_xticks([x + width * (len(seeds) - 1) / 2 for x in range(len(labels))], labels, rotation=45, ha="right")
    axis.set_ylabel("average JCT (s)")
    axis.set_title(title)
    axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
