"""Process plumbing shared by every sas entry point: logging, signals, clean exits."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, so alerts and errors can be parsed by log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


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
    code = 0
    try:
        asyncio.run(main())
    except SETTINGS_ERRORS as err:
        print(f"sas: invalid settings:\n{describe_settings_error(err)}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except RuntimeError as err:
        if "connect" not in str(err).lower():
            raise
        print(f"sas: {err}\n  Is the Temporal server running? Check SAS_TEMPORAL__ADDRESS.", file=sys.stderr)
        code = 1
    exit_hard(code)


# pydantic-settings raises SettingsError when a group or map set in one variable is not JSON.
SETTINGS_ERRORS = (ValidationError, SettingsError)


def describe_settings_error(err: Exception) -> str:
    """One line per bad SAS_* variable, naming it; never the rejected value (it may be a secret)."""
    if isinstance(err, ValidationError):
        return "\n".join(f"  SAS_{'__'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in err.errors())
    match = re.search(r'field "([^"]+)"', str(err))
    prefix = f"SAS_{match[1].upper()}" if match else "SAS_*"
    names = sorted(k for k in os.environ if k == prefix or k.startswith(prefix + "__")) or [prefix]
    return f"  {', '.join(names)}: not valid JSON (a group or map set in one variable must be a JSON object)"
