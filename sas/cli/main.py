"""The ``sas`` command: run the parts, submit and inspect tasks, act as an operator.

``sas --help``, ``sas COMMAND --help`` and ``sas --version`` answer at once: this module and
every command module import only typer, rich and the standard library at the top; Temporal's
client, SQLAlchemy, alembic, httpx and the settings are imported inside the commands that use
them, and a command's module only when that command runs (``sas.cli.commands``).
``tests/cli/test_startup_imports.py`` holds that; ``bench/startup.py`` and
``bench/show_latency.py`` time it.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from sas.cli import context
from sas.cli.commands import LazyGroup, plain_flags
from sas.cli.output import CliError, console, err_console, shown

app = typer.Typer(
    name="sas",
    cls=LazyGroup,
    help="Scheduler Agent Supervisor on Temporal: tasks that complete or are undone as a whole.",
    no_args_is_help=True,
    rich_markup_mode=None,
    # main() turns every failure into one line; typer's rich tracebacks would only cost start-up time.
    pretty_exceptions_enable=False,
)


def _print_version(wanted: bool) -> None:
    if not wanted:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        console.print(f"sas {version('sas')}", highlight=False)
    except PackageNotFoundError:
        console.print("sas (not installed: run from a source tree)", highlight=False)
    raise typer.Exit()


@app.callback()
def options(
    debug: bool = typer.Option(False, "--debug", help="On failure, also print the traceback."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Scheduler Agent Supervisor on Temporal: tasks that complete or are undone as a whole."""
    context.DEBUG = debug


# ---------------------------------------------------------------- processes


@app.command()
def migrate() -> None:
    """Create or upgrade the state store's tables (SAS_DATABASE__URL)."""
    from sas import state_store
    from sas.runtime.failures import mask_url, reaching_state_store
    from sas.state_store.migrate import ForeignDatabase

    url = context.settings().database.url
    try:
        with reaching_state_store(url):
            state_store.upgrade(url)
    except ForeignDatabase as err:
        raise CliError(str(err), code=2) from None
    console.print(f"state store at {shown(mask_url(url))} is up to date")


@app.command()
def setup() -> None:
    """Register sas's search attributes in the Temporal namespace (once per cluster)."""
    from sas.runtime.search_attributes import register_search_attributes

    added = context.run(lambda: context.with_client(register_search_attributes))
    console.print(f"search attributes: {shown(', '.join(added)) or 'all already registered'}")


@app.command()
def worker() -> None:
    """Run the Scheduler + Agents worker (same as `python worker.py`)."""
    from sas.runtime.entry import run_entry
    from sas.worker import run_worker

    run_entry(run_worker, debug=context.DEBUG)


@app.command()
def supervisor() -> None:
    """Run a Supervisor worker (same as `python -m sas.supervisor`)."""
    from sas.runtime.entry import run_entry
    from sas.supervisor.run.worker import run_supervisor

    run_entry(run_supervisor, debug=context.DEBUG)


# ------------------------------------------------------------ every other command

# Each lives in the module named after it (`sas show` in show_cmd.py; `sas up` and `sas demo` in
# up_demo_cmd.py), imported when the command is asked for: sas.cli.commands lists them.

# Where sas runs: POSIX process groups and signals (sas.runtime.processes, .lifeline), and
# flock for SQLite migrations. Linux and macOS; elsewhere one line says so (docs: README).
SUPPORTED_PLATFORMS = ("linux", "darwin")


def main() -> None:
    """Entry point of the ``sas`` script."""
    from sas.runtime.entry import exit_hard

    if not sys.platform.startswith(SUPPORTED_PLATFORMS):
        _print_error(
            f"sas runs on Linux and macOS, not on {sys.platform}",
            "use WSL or the Docker image (see the README's quick start)",
        )
        exit_hard(2)
    exit_hard(_run())


def _run() -> int:
    from typer import Abort, Exit
    from typer._click.exceptions import ClickException  # typer's own click: not re-exported

    from sas.client.errors import ClientError
    from sas.runtime.failures import DependencyUnreachable

    try:
        result = command()(standalone_mode=False)
        return result if isinstance(result, int) else 0
    except CliError as err:
        _print_error(err.message, err.hint)
        return err.code
    except ClientError as err:
        # The task client's typed errors (sas.client.errors) read as the commands' own.
        _print_error(err.message, err.hint)
        return 1
    except DependencyUnreachable as err:
        # Temporal or the state store cannot be reached or turned us away: one line says which and why.
        _print_error(str(err), err.hint)
        return 1
    except Exit as err:
        return err.exit_code
    except ClickException as err:
        # typer's usage and range errors, in the same shape as ours.
        err.show()
        return err.exit_code
    except (Abort, KeyboardInterrupt):
        return 130
    except Exception as err:  # noqa: BLE001 - anything else still ends in one line, not a wall of traceback
        discovery = sys.modules.get("sas.task_types.discovery")  # loaded by then if it raised this
        if discovery is not None and isinstance(err, discovery.TaskTypeError):
            _print_error(str(err), "fix the registration, or uninstall or unset what names the module")
            return 2
        _print_error(f"unexpected {type(err).__name__}: {err}", "run again with `sas --debug ...` for the traceback")
        return 1


def command() -> Any:
    """The click command tree of ``app``: the commands defined here built, the others built when
    asked for (``sas.cli.commands``), each with its flags shown as flags (``plain_flags``)."""
    from typer.main import get_command

    built = get_command(app)
    plain_flags(built)
    return built


def _print_error(message: str, hint: str | None) -> None:
    """`sas: <message>` and the hint, sanitised and escaped: both may carry user data (ids, reasons, paths)."""
    if context.DEBUG:
        import traceback

        traceback.print_exc()
    err_console.print(f"[bold red]sas:[/bold red] {shown(message)}", highlight=False)
    if hint:
        err_console.print(f"  {shown(hint)}", highlight=False)


if __name__ == "__main__":
    main()
