"""Structured log lines carry the ids given with ``extra=`` as fields."""

from __future__ import annotations

import json
import logging

from propius.logs import StructuredFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("control_plane.rounds", logging.INFO, __file__, 1, "job %s round %d closed",
                               ("j1", 3), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_ids() -> None:
    line = json.loads(StructuredFormatter("json").format(_record(job_id="j1", round=3, client_id="c 7")))
    assert {key: line[key] for key in ("level", "logger", "msg", "job_id", "round", "client_id")} == {
        "level": "info", "logger": "control_plane.rounds", "msg": "job j1 round 3 closed", "job_id": "j1",
        "round": 3, "client_id": "c 7"}


def test_key_value_pairs_quote_what_needs_it() -> None:
    line = StructuredFormatter("kv").format(_record(job_id="j1", attempt=0, client_id='a "b"'))
    assert line.split(" ", 1)[1].startswith('level=info logger=control_plane.rounds msg="job j1 round 3 closed" '
                                            'job_id=j1 attempt=0')
    assert line.endswith(r'client_id="a \"b\""')
