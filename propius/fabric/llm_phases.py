"""Derive a training iteration's phases from parallel degrees and a model's size.

Ranks follow :class:`propius.fabric.request.Parallelism`: ``rank = (p · dp + d) · tp + t``. Expert
parallelism (``ep``) splits each data-parallel group into groups of ``ep`` consecutive members.

One iteration, as a lockstep approximation of a 1F1B pipeline schedule (all stages in the same step at
once, the pipeline bubble added as compute):

- per micro-batch forward: compute ``2 · P_gpu · tokens`` FLOPs, TP all-reduces (two per layer, inside
  the scale-up domain), EP all-to-all (dispatch and combine per MoE layer), PP send of the activations
  (stage ``j`` to ``j+1``, each TP rank sending its ``1/tp`` slice);
- per micro-batch backward: twice the forward compute, the same TP and EP traffic, PP send of the
  activation gradients (``j+1`` to ``j``);
- the order is 1F1B: ``pp − 1`` warm-up forwards, then alternating forward and backward, then the
  remaining backwards; the warm-up and drain bubbles are ``(pp − 1)`` forward and backward times;
- data-parallel gradient all-reduce of the stage's gradients once, after the last backward (no overlap
  with backward compute), then the optimizer step, which precedes the next iteration's first phase.

Why lockstep: the circuit planner needs the order of phases on each rail, not the exact pipeline
timing; the bubble keeps the iteration time right to first order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from propius.fabric.phases import Collective, Phase
from propius.fabric.request import Parallelism

__all__ = ["Degrees", "ModelShape", "derive_phases", "llama3_8b"]

Positive = Annotated[float, Field(gt=0)]


class Degrees(BaseModel):
    """Parallel degrees with expert parallelism: ``ep`` divides ``dp`` (experts sharded over DP ranks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: Annotated[int, Field(ge=1)] = 1
    dp: Annotated[int, Field(ge=1)] = 1
    pp: Annotated[int, Field(ge=1)] = 1
    ep: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _ep_divides_dp(self) -> Degrees:
        if self.dp % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp={self.dp}")
        return self

    @property
    def parallelism(self) -> Parallelism:
        return Parallelism(tp=self.tp, dp=self.dp, pp=self.pp)

    @property
    def size(self) -> int:
        return self.tp * self.dp * self.pp


class ModelShape(BaseModel):
    """What the phase volumes and compute gaps are derived from. ``gpu_tflops`` is the *achieved*
    throughput per GPU (peak × MFU); MoE layers (``experts > 0``) occur every ``moe_every`` layers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params: Positive
    layers: Annotated[int, Field(ge=1)]
    hidden: Annotated[int, Field(ge=1)]
    seq_len: Annotated[int, Field(ge=1)] = 8192
    micro_batch: Annotated[int, Field(ge=1)] = 1
    micro_batches: Annotated[int, Field(ge=1)] = 8
    bytes_per_value: Annotated[int, Field(ge=1)] = 2
    experts: Annotated[int, Field(ge=0)] = 0
    top_k: Annotated[int, Field(ge=1)] = 2
    moe_every: Annotated[int, Field(ge=1)] = 1
    gpu_tflops: Positive = 125.0
    optimizer_ms: Annotated[float, Field(ge=0)] = 50.0


def llama3_8b(micro_batches: int = 8) -> ModelShape:
    """Llama-3-8B (8.03 B parameters, 32 layers, hidden 4096), 8k-token micro-batches, bf16, on A100s at
    312 TFLOP/s peak × 40 % MFU (assumed) = 125 TFLOP/s achieved."""
    return ModelShape(params=8.03e9, layers=32, hidden=4096, micro_batches=micro_batches)


def _groups(degrees: Degrees) -> dict[str, list[list[int]]]:
    groups = degrees.parallelism.groups()
    ep = [g[i:i + degrees.ep] for g in groups["dp"] for i in range(0, len(g), degrees.ep)] if degrees.ep > 1 else []
    return {**groups, "ep": [g for g in ep if len(g) > 1]}


def derive_phases(degrees: Degrees, model: ModelShape) -> list[Phase]:
    """One iteration's phases in order (see the module docstring)."""
    tp, pp, m = degrees.tp, degrees.pp, model.micro_batches
    groups = _groups(degrees)
    tokens = model.micro_batch * model.seq_len
    params_gpu = model.params / (pp * tp)
    t_fwd = 2 * params_gpu * tokens / (model.gpu_tflops * 1e12)
    t_bwd = 2 * t_fwd
    layers = max(1, model.layers // pp)
    moe_layers = layers // model.moe_every if model.experts else 0
    activation = tokens * model.hidden * model.bytes_per_value
    stage = {r: degrees.parallelism.coords(r)[2] for r in range(degrees.size)}
    pipes = groups["pp"]

    def pp_pairs(forward: bool) -> tuple[tuple[int, ...], ...]:
        pairs = []
        for pipe in pipes:
            by_stage = sorted(pipe, key=stage.__getitem__)
            for a, b in zip(by_stage, by_stage[1:], strict=False):
                pairs.append((a, b) if forward else (b, a))
        return tuple(pairs)

    def step(direction: str, mb: int, compute: float) -> list[Phase]:
        out: list[Phase] = []
        if groups["tp"]:
            out.append(Phase(f"tp-{direction}{mb}", "tp", Collective.ALL_REDUCE, _t(groups["tp"]), activation,
                             2 * layers, compute))
            compute = 0.0
        if moe_layers and groups["ep"]:
            dispatch = tokens * model.top_k * model.hidden * model.bytes_per_value / tp
            out.append(Phase(f"ep-{direction}{mb}", "ep", Collective.ALL_TO_ALL, _t(groups["ep"]), dispatch,
                             2 * moe_layers, compute))
            compute = 0.0
        if pipes:
            out.append(Phase(f"pp-{direction}{mb}", "pp", Collective.SEND_RECV, pp_pairs(direction == "fwd"),
                             activation / tp, 1, compute))
            compute = 0.0
        if not out:  # nothing communicates in this step: its compute joins the next phase
            out.append(Phase(f"compute-{direction}{mb}", "tp", Collective.ALL_REDUCE, (), 0.0, 1, compute))
        return out

    warm = min(pp - 1, m)
    order = [("fwd", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("fwd", warm + i), ("bwd", i)]
    order += [("bwd", i) for i in range(m - warm, m)]
    phases: list[Phase] = []
    for k, (direction, mb) in enumerate(order):
        compute = t_fwd if direction == "fwd" else t_bwd
        if k == 0:
            compute += model.optimizer_ms / 1e3
        if k == min(1, len(order) - 1):  # warm-up bubble: the last stage waits for the first forwards
            compute += (pp - 1) * t_fwd
        phases += step(direction, mb, compute)
    drain = (pp - 1) * t_bwd
    if groups["dp"]:
        grads = params_gpu * model.bytes_per_value
        phases.append(Phase("dp-grads", "dp", Collective.ALL_REDUCE, _t(groups["dp"]), grads, 1, drain))
    else:
        phases.append(Phase("drain", "tp", Collective.ALL_REDUCE, (), 0.0, 1, drain))
    return _fold_empty(phases)


def _t(groups: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g) for g in groups)


def _fold_empty(phases: list[Phase]) -> list[Phase]:
    """Drop communication-free placeholders, carrying their compute into the next phase (or the first)."""
    out: list[Phase] = []
    carry = 0.0
    for phase in phases:
        if not phase.groups:
            carry += phase.compute_s
            continue
        out.append(replace(phase, compute_s=phase.compute_s + carry))
        carry = 0.0
    if out and carry:
        out[0] = replace(out[0], compute_s=out[0].compute_s + carry)
    return out
