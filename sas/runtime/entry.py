"""Entry points of sas processes (worker, Supervisor, codec server, CLI): serving until a signal,
clean exits, and one clear line for bad settings or an unreachable Temporal."""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from sas.runtime.failures import DependencyUnreachable, MissingExtra
from sas.runtime.terminal import for_terminal


async def serve_until_signalled(*runners: Any) -> None:
    """Run Temporal workers (async context managers) until SIGINT or SIGTERM, then shut
    them down gracefully so in-flight activities finish or are handed back."""
    import asyncio

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


def run_entry(main: Callable[[], Coroutine[Any, Any, None]], debug: bool = False) -> None:
    """Run an async entry point; bad settings, a missing extra and an unreachable dependency end it
    with one clear line (and the traceback too with ``debug``), then exit hard (see ``exit_hard``)."""
    import asyncio

    code = 0
    try:
        asyncio.run(main())
    except settings_errors() as err:
        print(f"sas: invalid settings:\n{describe_settings_error(err)}", file=sys.stderr)
        code = 2
    except MissingExtra as err:
        print(f"sas: {err}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except DependencyUnreachable as err:
        if debug:
            traceback.print_exc()
        print(f"sas: {for_terminal(err)}\n  {err.hint}", file=sys.stderr)
        code = 1
    except Exception as err:
        from sas.state_store.migrate import ForeignDatabase
        from sas.task_types.discovery import TaskTypeError

        # A task type registered wrongly: its one line names the module and the problem.
        if not isinstance(err, ForeignDatabase | TaskTypeError):
            raise
        print(f"sas: {for_terminal(err)}", file=sys.stderr)
        code = 2
    exit_hard(code)


def settings_errors() -> tuple[type[Exception], ...]:
    """What reading bad settings raises. A group or map set in one variable that is not JSON
    reaches validation as text (sas/settings/), so pydantic reports it with its location;
    SettingsError stays for what pydantic-settings still raises. Imported when asked: the
    CLI's ``--help`` loads neither."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    return (ValidationError, SettingsError)


def __getattr__(name: str) -> Any:
    # SETTINGS_ERRORS, as before, without importing pydantic with this module.
    if name == "SETTINGS_ERRORS":
        return settings_errors()
    raise AttributeError(name)


_NOT_AN_OBJECT = {"model_type", "dict_type", "model_attributes_type"}


def describe_settings_error(err: Exception) -> str:
    """One line per bad SAS_* variable, naming it; never the rejected value (it may be a secret)."""
    from pydantic import ValidationError

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
