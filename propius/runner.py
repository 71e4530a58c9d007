"""The built-in job driver: FedAvg rounds of a TaskConfig model, evaluated on held-out synthetic data.

``propius submit --wait`` and ``propius demo`` use it; it is an ordinary SDK loop (see
:mod:`propius.sdk`), nothing the control plane treats specially.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from propius.sdk import AsyncJob, ChannelSecurity, ProgressCallback
from propius.specs import JobSpec

__all__ = ["JobReport", "RoundLog", "run_training_job"]


@dataclass(frozen=True)
class RoundLog:
    round: int
    attempt: int
    results: int
    seconds: float
    train_loss: float
    test_accuracy: float


@dataclass
class JobReport:
    name: str
    job_id: str = ""
    rounds: list[RoundLog] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def jct_s(self) -> float:
        return self.finished_at - self.started_at

    @property
    def final_accuracy(self) -> float:
        return self.rounds[-1].test_accuracy if self.rounds else 0.0


async def run_training_job(
    spec: JobSpec,
    server: str,
    *,
    target_accuracy: float | None = None,
    round_timeout_s: float = 120.0,
    on_round: Callable[[JobReport], None] | None = None,
    on_start: Callable[[AsyncJob], None] | None = None,
    progress: ProgressCallback | None = None,
    security: ChannelSecurity | None = None,
) -> JobReport:
    """Run ``spec.rounds`` FedAvg rounds (or until ``target_accuracy``); returns what happened.

    ``on_start`` is called once the job is registered (its ``job_id`` and ``token`` set), ``on_round``
    after each closed round and ``progress`` with each update of the open round (binds, results); ``security``:
    the channel's TLS settings (None: from the environment)."""
    from clients.executors.models import evaluate, initial_weights  # torch: only job drivers need it

    if spec.rounds is None and target_accuracy is None:
        raise ValueError("an open-ended job needs a target_accuracy to stop at")
    report = JobReport(name=spec.name, started_at=time.time())
    weights = initial_weights(spec.task, seed=int(spec.task.options.get("init_seed", 0)))
    async with AsyncJob(spec, server, security=security) as job:
        report.job_id = job.job_id
        if on_start:
            on_start(job)
        round_ = 0
        while spec.rounds is None or round_ < spec.rounds:
            began = time.time()
            result = await job.run_round(weights, timeout_s=round_timeout_s, progress=progress)
            weights = result.tensors
            quality = evaluate(spec.task, weights)
            report.rounds.append(
                RoundLog(round=result.info.round, attempt=result.info.attempt, results=result.info.results,
                         seconds=time.time() - began, train_loss=result.metrics.get("loss", float("nan")),
                         test_accuracy=quality["accuracy"])
            )
            if on_round:
                on_round(report)
            round_ += 1
            if target_accuracy is not None and quality["accuracy"] >= target_accuracy:
                break
    report.finished_at = time.time()
    return report
