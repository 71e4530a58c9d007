"""Phases of an iteration: explicit specs validated, and derivation from degrees and model size on a case
small enough to check by hand."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from propius.fabric.llm_phases import Degrees, ModelShape, derive_phases
from propius.fabric.phases import Collective, PhaseSpec

# 1e9 parameters over pp=2 stages: 5e8 per GPU; 1000 tokens per micro-batch at 1 TFLOP/s achieved:
# forward 2 · 5e8 · 1000 / 1e12 = 1 s, backward 2 s.
SMALL = ModelShape(params=1e9, layers=4, hidden=10, seq_len=1000, micro_batches=2, gpu_tflops=1.0,
                   optimizer_ms=0.0)


def test_dp2_pp2_iteration_is_1f1b_then_gradient_all_reduce() -> None:
    phases = derive_phases(Degrees(dp=2, pp=2), SMALL)
    # rank = p·dp + d: pipelines [0, 2] and [1, 3]; DP groups [0, 1] and [2, 3].
    assert [p.name for p in phases] == ["pp-fwd0", "pp-fwd1", "pp-bwd0", "pp-bwd1", "dp-grads"]
    assert phases[0].groups == ((0, 2), (1, 3)) and phases[2].groups == ((2, 0), (3, 1))
    assert phases[-1].groups == ((0, 1), (2, 3)) and phases[-1].collective == Collective.ALL_REDUCE
    # compute: F0 1 s; F1 1 s + warm-up bubble 1 s; B0, B1 2 s; drain bubble 2 s before the gradient sync
    assert [p.compute_s for p in phases] == pytest.approx([1.0, 2.0, 2.0, 2.0, 2.0])
    assert phases[0].bytes == 1000 * 10 * 2  # activations of one micro-batch, bf16
    assert phases[-1].bytes == 5e8 * 2  # the stage's gradients


def test_tp_and_ep_phases_and_their_volumes() -> None:
    moe = SMALL.model_copy(update={"experts": 8, "top_k": 2, "moe_every": 2})
    phases = derive_phases(Degrees(tp=2, dp=2, ep=2), moe)
    names = [p.name for p in phases]
    assert names == ["tp-fwd0", "ep-fwd0", "tp-bwd0", "ep-bwd0", "tp-fwd1", "ep-fwd1", "tp-bwd1", "ep-bwd1",
                     "dp-grads"]  # no pipeline: forward and backward alternate
    tp, ep = phases[0], phases[1]
    assert tp.groups == ((0, 1), (2, 3)) and tp.count == 2 * 4  # two all-reduces per layer, 4 layers
    assert ep.groups == ((0, 2), (1, 3)) and ep.count == 2 * 2  # dispatch + combine, 2 MoE layers
    assert ep.bytes == 1000 * 2 * 10 * 2 / 2  # tokens · top_k · hidden · bf16, a 1/tp slice per rank
    assert ep.compute_s == 0.0 and tp.compute_s == pytest.approx(2 * 5e8 * 1000 / 1e12)


def test_ep_must_divide_dp() -> None:
    with pytest.raises(ValidationError, match="ep=3 must divide dp=4"):
        Degrees(dp=4, ep=3)


@pytest.mark.parametrize(("groups", "collective", "message"), [
    ([[0]], "all-reduce", "at least two distinct ranks"),
    ([[0, 1, 2]], "send-recv", "a pair"),
    ([[0, 1], [1, 2]], "all-reduce", "rank 1 is in two groups"),
])
def test_phase_spec_refuses_bad_groups(groups: list[list[int]], collective: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PhaseSpec(name="p", kind="dp", collective=collective, groups=groups, bytes=1.0)


def test_phase_spec_becomes_a_phase() -> None:
    phase = PhaseSpec(name="pp", kind="pp", collective="send-recv", groups=[[0, 1], [1, 2]], bytes=8,
                      compute_ms=5).phase()
    assert phase.groups == ((0, 1), (1, 2)) and phase.compute_s == 0.005 and phase.ranks() == {0, 1, 2}
