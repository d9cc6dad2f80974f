"""Run the remote services: ``python -m sas_demo_services --port 8081 --ledger PATH [--enable-faults]``.

Environment fallbacks: ``SAS_SERVICES_LEDGER`` for ``--ledger`` and
``SAS_SERVICES_ENABLE_FAULTS=1`` for ``--enable-faults``. The ``/admin`` API also needs
``SAS_SERVICES__ADMIN_TOKEN`` (the same variable its callers read; never a flag, which
``ps`` would show). Bad arguments print a usage message and exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn

from sas_demo_services.app import DEFAULT_MAX_BODY_BYTES, create_app

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}

# Give in-flight requests (a hang fault, say) this long after SIGTERM before cutting them off.
_GRACEFUL_SHUTDOWN_S = 2


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 1 and 65535, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="python -m sas_demo_services",
        description="Inventory, payment and shipping services with a ledger and optional fault injection.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    parser.add_argument("--port", type=_port, default=8081, help="TCP port (default: %(default)s)")
    parser.add_argument("--ledger", help="SQLite ledger file (default: $SAS_SERVICES_LEDGER)")
    parser.add_argument(
        "--enable-faults",
        action="store_true",
        default=None,
        help="serve the /admin fault-injection API (default: $SAS_SERVICES_ENABLE_FAULTS=1)",
    )
    parser.add_argument("--fault-seed", type=int, help="seed fault probabilities for a repeatable run")
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="longest request body accepted; longer ones get 413 (default: %(default)s)",
    )
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default="info", help="(default: %(default)s)"
    )
    parser.add_argument("--access-log", action="store_true", help="log every request")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and serve until SIGTERM/SIGINT.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` if None.

    Returns:
        The exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)

    ledger = args.ledger or os.environ.get("SAS_SERVICES_LEDGER")
    if not ledger:
        parser.error("--ledger is required (or set SAS_SERVICES_LEDGER)")
    enable_faults = args.enable_faults
    if enable_faults is None:
        flag = os.environ.get("SAS_SERVICES_ENABLE_FAULTS", "").strip().lower()
        if flag not in _TRUE | _FALSE:
            parser.error(f"SAS_SERVICES_ENABLE_FAULTS must be 1 or 0, got {flag!r}")
        enable_faults = flag in _TRUE

    try:
        Path(ledger).parent.mkdir(parents=True, exist_ok=True)
        app = create_app(
            ledger,
            enable_faults=enable_faults,
            fault_seed=args.fault_seed,
            admin_token=os.environ.get("SAS_SERVICES__ADMIN_TOKEN") or None,
            max_body_bytes=args.max_body_bytes,
        )
    except ValueError as err:
        parser.error(f"--enable-faults: {err}")
    except (OSError, sqlite3.Error) as err:
        parser.error(f"cannot open ledger {ledger!r}: {err}")

    _json_logs(args.log_level.upper())
    logging.getLogger("sas_demo_services").info(
        "starting on http://%s:%d ledger=%s faults=%s", args.host, args.port, ledger, "on" if enable_faults else "off"
    )
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            log_config=None,  # uvicorn's loggers go through the JSON root handler too
            access_log=args.access_log,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S,
            lifespan="on",
        )
    )
    server.run()
    return 0 if server.started else 1


def _json_logs(level: str) -> None:
    """JSON lines on stderr, as every sas process logs them (``ts`` in UTC, ``level``, ``logger``,
    ``msg``, then the record's fields): the services stand alone, so they format them here
    rather than with sas.runtime.logs."""
    from pythonjsonlogger.json import JsonFormatter

    class Formatter(JsonFormatter):
        def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message: dict[str, Any]) -> None:
            fields: dict[str, Any] = {}
            super().add_fields(fields, record, message)
            fields.pop("color_message", None)  # uvicorn's copy of msg with terminal colours
            log_data["ts"] = fields.pop("ts")
            log_data.update(fields, level=record.levelname.lower())

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        Formatter(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "message": "msg", "exc_info": "exc"},
            timestamp="ts",
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
