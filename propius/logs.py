"""Log setup for Propius processes: human-readable text, JSON lines or key=value pairs.

Control-plane records carry their subjects as fields (``log.info(..., extra={"job_id": ..., "round": ...})``);
the text format shows the message only, the structured ones add every such field, so a log pipeline can
filter one job's or one client's lines without parsing messages. Stdlib only.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

__all__ = ["LogFormat", "StructuredFormatter", "record_fields", "setup_logging"]

LogFormat = Literal["text", "json", "kv"]

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What every LogRecord has; anything else on a record came from ``extra=`` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record was given with ``extra=``."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class StructuredFormatter(logging.Formatter):
    """One line per record: ``json`` (an object) or ``kv`` (``key=value`` pairs, values quoted when needed)."""

    def __init__(self, style: Literal["json", "kv"]) -> None:
        super().__init__()
        self._style = style

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                                  "logger": record.name, "msg": record.getMessage(), **record_fields(record)}
        if record.exc_info:
            fields["exc"] = self.formatException(record.exc_info)
        if self._style == "json":
            return json.dumps(fields, default=str, ensure_ascii=False)
        return " ".join(f"{key}={_kv_value(value)}" for key, value in fields.items())


def _kv_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def setup_logging(level: int | str = logging.INFO, style: LogFormat = "text") -> None:
    """Configure the root logger once for a process (replacing earlier handlers); APScheduler, which logs
    every run of every periodic task at INFO, is kept at WARNING."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(_TEXT) if style == "text" else StructuredFormatter(style))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
