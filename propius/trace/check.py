"""The validator: every way a folder deviates from the CCL-Bench data-point format, as a list of problems.

It reports all deviations at once rather than stopping at the first, because a data point is usually
fixed in one pass; ``propius trace check`` exits non-zero when the list is not empty.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from propius.trace.card import Card
from propius.trace.format import RANK_FILE, RUN_SCRIPT, STEP_CATEGORY, card_file, is_communication, step_number

__all__ = ["CLOCK_TOLERANCE_S", "MIN_STEPS", "Problem", "check_data_point"]

MIN_STEPS = 5
"""The toolkit drops the first and the last step, so fewer leave too little to measure."""
CLOCK_TOLERANCE_S = 1.0
"""Ranks on one clock start a step together (one round): more apart than this is not one clock."""
_ABSOLUTE_US = 1e14
"""A timestamp above this (1973 in unix µs) is absolute; relative traces start near zero."""
_MAX_EVENT_PROBLEMS = 10
_REQUIRED = ("name", "cat", "ts", "dur", "pid", "tid", "args")


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class _StepEvent:
    number: int
    ts: float
    dur: float


@dataclass
class _RankFacts:
    steps: list[_StepEvent]
    first_ts: float | None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _check_card(folder: Path, problems: list[Problem]) -> None:
    expected = card_file(folder.name)
    cards = sorted(p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    if not cards:
        problems.append(Problem(folder.name, f"no workload card (expected {expected})"))
        return
    if len(cards) > 1:
        problems.append(Problem(folder.name, f"exactly one card expected ({expected}), found {', '.join(cards)}"))
    if expected not in cards:
        problems.append(Problem(cards[0], f"the card must be named after the folder: {expected}"))
    name = expected if expected in cards else cards[0]
    try:
        data = yaml.safe_load((folder / name).read_text())
    except yaml.YAMLError as error:
        problems.append(Problem(name, f"not valid YAML: {error}"))
        return
    if not isinstance(data, dict):
        problems.append(Problem(name, "the card is not a YAML mapping"))
        return
    try:
        card = Card.model_validate(data)
    except ValidationError as error:
        for item in error.errors():
            field = ".".join(str(part) for part in item["loc"])
            what = "missing" if item["type"] == "missing" else item["msg"]
            problems.append(Problem(name, f"card field {field}: {what}"))
        return
    if "json" not in card.metric_source.traces:
        problems.append(Problem(name, "card field metric_source.traces must list 'json' for rank<N>_trace.json"))
    _check_name(folder.name, card.workload.model.model_family, problems)


def _squashed(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _check_name(name: str, model_family: str, problems: list[Problem]) -> None:
    """CCL-Bench's convention ``<model>-<framework+parallelism>-<platform>-<group>``: four or more parts, the
    first the model (compared without case and punctuation: ``Mixtral8x7B`` is ``mixtral-8x7b``)."""
    parts = name.split("-")
    if len(parts) < 4 or not all(parts) or not _squashed(name).startswith(_squashed(model_family)):
        problems.append(Problem(name, f"the folder name must follow <model>-<framework+parallelism>-<platform>-"
                                      f"<group>, starting with the card's model_family {model_family!r}"))


def _check_files(folder: Path, problems: list[Problem]) -> dict[int, Path]:
    if "tpu" in folder.name.lower():
        problems.append(Problem(folder.name, "the folder name contains 'tpu': the toolkit reads such a data point "
                                             "as a TPU trace"))
    ranks = {}
    for path in sorted(folder.glob("*.json")):
        match = RANK_FILE.match(path.name)
        if match:
            ranks[int(match.group(1))] = path
        else:
            problems.append(Problem(path.name, "not a rank trace name (rank<N>_trace.json); no other *.json may be "
                                               "in a data point"))
    if not ranks:
        problems.append(Problem(folder.name, "no rank<N>_trace.json"))
    missing = sorted(set(range(max(ranks, default=-1) + 1)) - set(ranks))
    if missing:
        problems.append(Problem(folder.name, "rank files must be numbered 0..N-1 without gaps; missing "
                                + ", ".join(f"rank{n}_trace.json" for n in missing)))
    script = folder / RUN_SCRIPT
    if not script.is_file():
        problems.append(Problem(RUN_SCRIPT, "missing: the command that reproduces the run"))
    elif not os.access(script, os.X_OK):
        problems.append(Problem(RUN_SCRIPT, "not executable"))
    elif not script.read_text().strip():
        problems.append(Problem(RUN_SCRIPT, "empty"))
    return dict(sorted(ranks.items()))


def _event_problems(index: int, event: Any) -> list[str]:
    if not isinstance(event, dict):
        return [f"event #{index} is not an object"]
    if "ph" not in event:
        return [f"event #{index} has no ph"]
    if event["ph"] != "X":
        return []
    label = f"event #{index} ({event.get('name', '?')!s})"
    found = [f"{label} has no {key}" for key in _REQUIRED if key not in event]
    found += [f"{label}: {key} must be a number >= 0 (µs)" for key in ("ts", "dur")
              if key in event and not _is_number(event[key])]
    found += [f"{label}: {key} must be a string" for key in ("name", "cat")
              if key in event and not isinstance(event[key], str)]
    if "args" in event and not isinstance(event["args"], dict):
        found.append(f"{label}: args must be an object")
    name, args = str(event.get("name", "")), event.get("args") if isinstance(event.get("args"), dict) else {}
    if step_number(name) is not None and event.get("cat") != STEP_CATEGORY:
        found.append(f"{label}: a step must have cat {STEP_CATEGORY!r}")
    if "transport" in args and not is_communication(name):
        found.append(f"{label} is a transfer (args.transport) but its name has no communication token; "
                     "the toolkit would count it as compute")
    if args.get("synthetic_kernel") is True and "transport" not in args and is_communication(name):
        found.append(f"{label} is compute (no args.transport) but its name has a communication token; "
                     "the toolkit would count it as communication")
    return found


def _check_trace(path: Path, problems: list[Problem]) -> _RankFacts:
    facts = _RankFacts([], None)
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        problems.append(Problem(path.name, f"not readable JSON: {error}"))
        return facts
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list):
        problems.append(Problem(path.name, "not a JSON object with a traceEvents list"))
        return facts
    found: list[str] = []
    for index, event in enumerate(events):
        found += _event_problems(index, event)
        if not isinstance(event, dict) or event.get("ph") != "X" or not _is_number(event.get("ts")):
            continue
        facts.first_ts = event["ts"] if facts.first_ts is None else min(facts.first_ts, event["ts"])
        number = step_number(str(event.get("name", "")))
        if number is not None and _is_number(event.get("dur")):
            facts.steps.append(_StepEvent(number, event["ts"], event["dur"]))
    problems += [Problem(path.name, message) for message in found[:_MAX_EVENT_PROBLEMS]]
    if len(found) > _MAX_EVENT_PROBLEMS:
        problems.append(Problem(path.name, f"... and {len(found) - _MAX_EVENT_PROBLEMS} more event problems"))
    return facts


def _check_steps(folder: Path, ranks: dict[int, _RankFacts], paths: dict[int, Path],
                 problems: list[Problem]) -> None:
    every = sorted({step.number for facts in ranks.values() for step in facts.steps})
    for rank, facts in ranks.items():
        where = paths[rank].name
        for number, count in sorted(Counter(step.number for step in facts.steps).items()):
            if count > 1:
                problems.append(Problem(where, f"ProfilerStep#{number} appears {count} times; one per step"))
        ordered = sorted(facts.steps, key=lambda step: step.ts)
        for before, after in zip(ordered, ordered[1:], strict=False):
            if after.number <= before.number:
                problems.append(Problem(where, f"non-monotonic steps: ProfilerStep#{after.number} starts after "
                                               f"ProfilerStep#{before.number}"))
            elif after.ts < before.ts + before.dur:
                problems.append(Problem(where, f"non-monotonic steps: ProfilerStep#{after.number} starts before "
                                               f"ProfilerStep#{before.number} ends"))
        missing = sorted(set(every) - {step.number for step in facts.steps})
        if missing:
            shown = ", ".join(f"#{n}" for n in missing[:5]) + (" ..." if len(missing) > 5 else "")
            problems.append(Problem(where, f"lacks ProfilerStep {shown}, which other ranks have"))
    if not every:
        problems.append(Problem(folder.name, "no ProfilerStep#<n> user_annotation events"))
    elif len(every) < MIN_STEPS:
        problems.append(Problem(folder.name, f"only {len(every)} steps; at least {MIN_STEPS} are needed "
                                             "(the toolkit drops the first and the last)"))


def _check_clocks(folder: Path, ranks: dict[int, _RankFacts], problems: list[Problem]) -> None:
    firsts = {rank: facts.first_ts for rank, facts in ranks.items() if facts.first_ts is not None}
    absolute = sorted(rank for rank, ts in firsts.items() if ts >= _ABSOLUTE_US)
    if absolute and len(absolute) < len(firsts):
        relative = sorted(set(firsts) - set(absolute))
        problems.append(Problem(folder.name, f"mixed clocks: ranks {absolute} use absolute unix µs, ranks "
                                             f"{relative} relative time"))
    starts: dict[int, dict[int, float]] = {}
    for rank, facts in ranks.items():
        for step in facts.steps:
            starts.setdefault(step.number, {}).setdefault(rank, step.ts)
    apart = []
    for number, by_rank in sorted(starts.items()):
        if len(by_rank) >= 2 and max(by_rank.values()) - min(by_rank.values()) > CLOCK_TOLERANCE_S * 1e6:
            early, late = min(by_rank, key=by_rank.__getitem__), max(by_rank, key=by_rank.__getitem__)
            apart.append(f"#{number} (rank {early} vs {late}: {(by_rank[late] - by_rank[early]) / 1e6:.3g} s)")
    if apart:
        problems.append(Problem(folder.name, f"mixed clocks: ProfilerStep starts differ by more than "
                                             f"{CLOCK_TOLERANCE_S:g} s across ranks at {', '.join(apart[:3])}"
                                             + (f" and {len(apart) - 3} more steps" if len(apart) > 3 else "")))


def check_data_point(folder: Path) -> list[Problem]:
    """Every deviation of ``folder`` from the format; empty when it is a valid data point."""
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(str(folder), "not a folder")]
    problems: list[Problem] = []
    _check_card(folder, problems)
    paths = _check_files(folder, problems)
    ranks = {rank: _check_trace(path, problems) for rank, path in paths.items()}
    _check_steps(folder, ranks, paths, problems)
    _check_clocks(folder, ranks, problems)
    return problems
