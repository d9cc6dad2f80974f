"""Process plumbing shared by every sas entry point: logging, signals, clean exits."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError
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


async def serve_until_signalled(*runners: Any) -> None:
    """Run Temporal workers (async context managers) until SIGINT or SIGTERM, then shut
    them down gracefully so in-flight activities finish or are handed back."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    entered = []
    try:
        for runner in runners:
            entered.append(await runner.__aenter__())
        await stop.wait()
    finally:
        for runner in reversed(runners[: len(entered)]):
            await runner.__aexit__(None, None, None)


def exit_hard(code: int) -> None:
    """Exit without running the interpreter's shutdown, which can abort in temporalio's
    Rust bridge (sdk-python #300) and turn exit 0 into 134."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def run_entry(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run an async entry point with friendly errors for bad settings and unreachable
    services, then exit hard (see ``exit_hard``)."""
    from sas_cli.connect import TemporalUnreachable

    code = 0
    try:
        asyncio.run(main())
    except SETTINGS_ERRORS as err:
        print(f"sas: invalid settings:\n{describe_settings_error(err)}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except TemporalUnreachable as err:
        print(f"sas: {err}\n  Is the Temporal server running? Check SAS_TEMPORAL__ADDRESS.", file=sys.stderr)
        code = 1
    exit_hard(code)


# A group or map set in one variable that is not JSON reaches validation as text (settings.py), so
# pydantic reports it with its location; SettingsError stays for what pydantic-settings still raises.
SETTINGS_ERRORS = (ValidationError, SettingsError)
_NOT_AN_OBJECT = {"model_type", "dict_type", "model_attributes_type"}


def describe_settings_error(err: Exception) -> str:
    """One line per bad SAS_* variable, naming it; never the rejected value (it may be a secret)."""
    if not isinstance(err, ValidationError):
        return f"  {err}"
    lines = []
    for error in err.errors(include_input=False, include_url=False):
        name = "SAS_" + "__".join(str(part) for part in error["loc"]).upper()
        if error["type"] in _NOT_AN_OBJECT:
            lines.append(f"  {name}: not valid JSON (a group or map set in one variable must be a JSON object)")
        else:
            lines.append(f"  {name}: {error['msg']}")
    return "\n".join(lines)
