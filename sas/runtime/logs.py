"""Logs are JSON lines on stderr, one object per record, for log shippers."""

from __future__ import annotations

import logging
import sys
from typing import Any

from pythonjsonlogger.json import JsonFormatter


class JsonLogFormatter(JsonFormatter):
    """One JSON object per line, for log shippers: ``ts`` (UTC, ISO 8601), ``level``, ``logger``,
    ``msg``, then the record's extra fields (Temporal's workflow and activity context among them)."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "message": "msg", "exc_info": "exc"},
            timestamp="ts",
        )

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        fields: dict[str, Any] = {}
        super().add_fields(fields, record, message_dict)
        # The time first, as a person scans a log; then the level, lower case as before.
        log_data["ts"] = fields.pop("ts")
        log_data.update(fields, level=record.levelname.lower())
        # sas's own loggers pass their fields as extra={"fields": {...}}: give them top-level keys.
        extra = log_data.pop("fields", None)
        if isinstance(extra, dict):
            log_data.update(extra)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request at INFO; the Agents' step logs already say what was called, and a
    # line per HTTP request costs the worker a JSON encode per remote call. Kept at DEBUG.
    quiet = logging.WARNING if root.getEffectiveLevel() > logging.DEBUG else logging.DEBUG
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(quiet)
