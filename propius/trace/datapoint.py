"""Read any CCL-Bench data point (ours or another contributor's) into plain per-rank steps and work spans.

Reading is lenient, as the toolkit's is: events it cannot use (no ``dur``, not complete events) are
skipped here; reporting them is the validator's job, not the metrics'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from propius.trace.format import RANK_FILE, STEP_CATEGORY, WORK_CATEGORY, card_file, is_communication, step_number

__all__ = ["DataPoint", "RankTrace", "Span", "Step", "load_data_point"]


@dataclass(frozen=True)
class Step:
    number: int
    start: float
    end: float


@dataclass(frozen=True)
class Span:
    """One work event (a kernel, in the toolkit's terms); times in microseconds."""

    name: str
    start: float
    end: float
    communication: bool


@dataclass
class RankTrace:
    """``steps``: the first ``ProfilerStep#<n>`` of each number; ``step_events``: every one, in file order (the
    toolkit's tools read all of them)."""

    rank: int
    steps: dict[int, Step] = field(default_factory=dict)
    step_events: list[Step] = field(default_factory=list)
    work: list[Span] = field(default_factory=list)


@dataclass
class DataPoint:
    folder: Path
    card: dict[str, Any]
    ranks: dict[int, RankTrace]

    @property
    def server_rank(self) -> int | None:
        """The rank that is not a worker (a FL aggregator), when the card's collection notes name one."""
        notes = self.card.get("collection_notes")
        value = notes.get("server_rank") if isinstance(notes, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _rank(rank: int, events: list[Any]) -> RankTrace:
    trace = RankTrace(rank)
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        ts, dur, name = _number(event.get("ts")), _number(event.get("dur")), str(event.get("name", ""))
        if ts is None or dur is None or dur < 0:
            continue
        number = step_number(name)
        if number is not None and event.get("cat") == STEP_CATEGORY:
            trace.steps.setdefault(number, Step(number, ts, ts + dur))
            trace.step_events.append(Step(number, ts, ts + dur))
        elif event.get("cat") == WORK_CATEGORY:
            trace.work.append(Span(name, ts, ts + dur, is_communication(name)))
    return trace


def load_data_point(folder: Path) -> DataPoint:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    card_path = folder / card_file(folder.name)
    cards = [card_path] if card_path.is_file() else sorted(folder.glob("*.yaml"))
    card = yaml.safe_load(cards[0].read_text()) if cards else {}
    ranks = {}
    for path in folder.iterdir():
        match = RANK_FILE.match(path.name)
        if match:
            document = json.loads(path.read_text())
            events = document.get("traceEvents", []) if isinstance(document, dict) else []
            ranks[int(match.group(1))] = _rank(int(match.group(1)), events if isinstance(events, list) else [])
    if not ranks:
        raise FileNotFoundError(f"{folder} has no rank<N>_trace.json")
    return DataPoint(folder, card if isinstance(card, dict) else {}, dict(sorted(ranks.items())))
