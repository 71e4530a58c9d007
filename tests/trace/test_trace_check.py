"""The validator passes the hand-made data point and catches each listed defect, one broken thing at a time."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from propius.trace.check import check_data_point
from propius.trace.cli import app


def messages(folder) -> list[str]:
    return [str(problem) for problem in check_data_point(folder)]


def test_the_hand_made_data_point_is_valid(handmade) -> None:
    assert messages(handmade.folder) == []


def test_missing_card_fields_are_all_listed(handmade) -> None:
    card = handmade.card()
    del card["workload"]["model"]["precision"]
    del card["contact"]
    del card["Model-executor"]["communication_library"]["version"]
    handmade.save_card(card)
    found = messages(handmade.folder)
    assert sorted(found) == sorted(f"mlp-fl-cpu-t0.yaml: card field {field}: missing" for field in (
        "workload.model.precision", "contact", "Model-executor.communication_library.version"))


TEMPLATE_FIELDS = ("hf_url", "trace_url", "workload.model.moe", "workload.model.granularity", "workload.data.seq_len",
                   "workload.hardware.driver_version", "Model-executor.framework.compiler_tool_selection",
                   "Model-executor.model_plan_parallelization.pp_mb", "Model-executor.communication_library.env",
                   "metric_source.metrics_specific_trace")


def test_every_field_of_ccl_bench_s_template_is_required(handmade) -> None:
    """The fields of the toolkit's workload_card_template.yaml that a card may hold as null (not applicable) but
    must not leave out."""
    card = handmade.card()
    for field in TEMPLATE_FIELDS:
        *path, key = field.split(".")
        section = card
        for part in path:
            section = section[part]
        del section[key]
    handmade.save_card(card)
    assert sorted(messages(handmade.folder)) == sorted(
        f"mlp-fl-cpu-t0.yaml: card field {field}: missing" for field in TEMPLATE_FIELDS)


def test_the_folder_name_follows_ccl_bench_s_convention(handmade_named) -> None:
    assert messages(handmade_named("Mlp-propius-dp3-cpu-group_7").folder) == []  # case and "_" do not matter
    for name in ("handmade", "mlp-handmade-cpu", "cnn-propius-dp3-cpu-tests", "mlp--dp3-cpu-tests"):
        assert messages(handmade_named(name).folder) == [
            f"{name}: the folder name must follow <model>-<framework+parallelism>-<platform>-<group>, starting "
            "with the card's model_family 'mlp'"]


def test_a_card_not_named_after_the_folder(handmade) -> None:
    handmade.card_path.rename(handmade.folder / "card.yaml")
    assert any("must be named after the folder: mlp-fl-cpu-t0.yaml" in m for m in messages(handmade.folder))


def test_bad_rank_file_name(handmade) -> None:
    (handmade.folder / "rank3_trace.json").rename(handmade.folder / "rank3.json")
    assert messages(handmade.folder) == [
        "rank3.json: not a rank trace name (rank<N>_trace.json); no other *.json may be in a data point"]


def test_rank_files_must_not_have_gaps(handmade) -> None:
    (handmade.folder / "rank2_trace.json").unlink()
    assert "mlp-fl-cpu-t0: rank files must be numbered 0..N-1 without gaps; missing rank2_trace.json" in messages(
        handmade.folder)


def test_extra_json_file(handmade) -> None:
    (handmade.folder / "metrics.json").write_text("{}")
    assert messages(handmade.folder) == [
        "metrics.json: not a rank trace name (rank<N>_trace.json); no other *.json may be in a data point"]


def test_event_without_dur(handmade) -> None:
    document = handmade.rank(2)
    training = next(e for e in document["traceEvents"] if e["name"] == "local_training")
    del training["dur"]
    handmade.save_rank(2, document)
    found = messages(handmade.folder)
    assert len(found) == 1 and found[0].startswith("rank2_trace.json: event #") and found[0].endswith(
        "(local_training) has no dur")


def test_non_monotonic_steps(handmade) -> None:
    document = handmade.rank(1)
    for event in document["traceEvents"]:  # steps 2 and 3 swap their names
        if event["name"] in ("ProfilerStep#2", "ProfilerStep#3"):
            event["name"] = "ProfilerStep#3" if event["name"] == "ProfilerStep#2" else "ProfilerStep#2"
    handmade.save_rank(1, document)
    assert messages(handmade.folder) == [
        "rank1_trace.json: non-monotonic steps: ProfilerStep#2 starts after ProfilerStep#3"]


def test_overlapping_steps(handmade) -> None:
    document = handmade.rank(0)
    next(e for e in document["traceEvents"] if e["name"] == "ProfilerStep#1")["dur"] = 15_000
    handmade.save_rank(0, document)
    assert "rank0_trace.json: non-monotonic steps: ProfilerStep#2 starts before ProfilerStep#1 ends" in messages(
        handmade.folder)


def test_mixed_clocks_absolute_and_relative(handmade) -> None:
    document = handmade.rank(3)
    for event in document["traceEvents"]:
        event["ts"] += 1_765_000_000_000_000  # this rank in unix µs, the others relative
    handmade.save_rank(3, document)
    found = messages(handmade.folder)
    assert "mlp-fl-cpu-t0: mixed clocks: ranks [3] use absolute unix µs, ranks [0, 1, 2] relative time" in found
    assert any(m.startswith("mlp-fl-cpu-t0: mixed clocks: ProfilerStep starts differ by more than 1 s") for m in found)


def test_mixed_clocks_offset_between_ranks(handmade) -> None:
    document = handmade.rank(2)
    for event in document["traceEvents"]:
        event["ts"] += 5_000_000  # 5 s late: a client clock never moved onto the server's
    handmade.save_rank(2, document)
    found = messages(handmade.folder)
    assert len(found) == 1 and "ProfilerStep starts differ by more than 1 s across ranks at #0 (rank 0 vs 2: 5 s)" \
        in found[0]


def test_tpu_in_the_name(handmade_named) -> None:
    point = handmade_named("mlp-fl-on-tpu-pods")
    assert messages(point.folder) == [
        "mlp-fl-on-tpu-pods: the folder name contains 'tpu': the toolkit reads such a data point as a TPU trace"]


def test_transfer_without_a_communication_token(handmade) -> None:
    document = handmade.rank(1)
    for event in document["traceEvents"]:
        if event["name"] == "sendrecv_update_upload":
            event["name"] = "update_upload"
    handmade.save_rank(1, document)
    found = messages(handmade.folder)
    assert len(found) == 3  # one per inner step
    assert all("(update_upload) is a transfer (args.transport) but its name has no communication token" in m
               for m in found)


def test_compute_with_a_communication_token(handmade) -> None:
    document = handmade.rank(0)
    for event in document["traceEvents"]:
        if event["name"] == "fedavg_fold_update":
            event["name"] = "fedavg_fold_recv"
    handmade.save_rank(0, document)
    assert all("(fedavg_fold_recv) is compute (no args.transport) but its name has a communication token" in m
               for m in messages(handmade.folder))


def test_fewer_than_five_steps(handmade) -> None:
    for rank in range(4):
        document = handmade.rank(rank)
        document["traceEvents"] = [e for e in document["traceEvents"] if e["ts"] < 40_000]
        handmade.save_rank(rank, document)
    assert messages(handmade.folder) == [
        "mlp-fl-cpu-t0: only 4 steps; at least 5 are needed (the toolkit drops the first and the last)"]


def test_a_rank_missing_a_step(handmade) -> None:
    document = handmade.rank(2)
    document["traceEvents"] = [e for e in document["traceEvents"] if e["name"] != "ProfilerStep#2"]
    handmade.save_rank(2, document)
    assert messages(handmade.folder) == ["rank2_trace.json: lacks ProfilerStep #2, which other ranks have"]


@pytest.mark.parametrize("defect", ["missing", "not executable"])
def test_run_script(handmade, defect: str) -> None:
    script = handmade.folder / "run.sh"
    if defect == "missing":
        script.unlink()
    else:
        os.chmod(script, 0o644)
    assert messages(handmade.folder) == [f"run.sh: {defect}" + (": the command that reproduces the run"
                                                                 if defect == "missing" else "")]


def test_not_a_trace_object(handmade) -> None:
    (handmade.folder / "rank1_trace.json").write_text(json.dumps([{"ph": "X"}]))
    assert "rank1_trace.json: not a JSON object with a traceEvents list" in messages(handmade.folder)


def test_cli_check_exits_non_zero_and_prints_each_problem(handmade) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["check", str(handmade.folder)]).exit_code == 0
    (handmade.folder / "extra.json").write_text("{}")
    (handmade.folder / "run.sh").unlink()
    result = runner.invoke(app, ["check", str(handmade.folder)])
    assert result.exit_code == 1
    assert "extra.json: not a rank trace name" in result.output and "run.sh: missing" in result.output
