"""Which module holds each ``sas`` command, and the group that imports a command's module only
when that command is asked for: ``sas show ID`` imports show_cmd.py and builds its one click
command, not the thirty others. ``sas --help`` lists every command, so it imports them all (each
imports only typer, rich and the standard library at its top: main.py says so)."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

import typer
from typer._click import Context  # typer's own click: not re-exported
from typer._click.exceptions import UsageError
from typer.core import TyperGroup
from typer.main import get_group

# Command -> its module in sas.cli, in the order `sas --help` lists them. A module's
# ``register(app)`` adds its commands (approve_reject_cmd.py adds two; schedule_cmd.py a group);
# tests/cli/test_lazy_commands.py holds this table to what each module registers.
COMMAND_MODULES: dict[str, str] = {
    "submit": "submit_cmd",
    "status": "status_cmd",
    "list": "list_cmd",
    "retry": "retry_cmd",
    "resubmit": "resubmit_cmd",
    "compensate": "compensate_cmd",
    "park": "park_cmd",
    "complete": "complete_cmd",
    "fix-input": "fix_input_cmd",
    "skip": "skip_cmd",
    "redrive": "redrive_cmd",
    "approve": "approve_reject_cmd",
    "reject": "approve_reject_cmd",
    "up": "up_demo_cmd",
    "demo": "up_demo_cmd",
    "show": "show_cmd",
    "codec-server": "codec_server_cmd",
    "health": "health_cmd",
    "incidents": "incidents_cmd",
    "reconcile": "reconcile_cmd",
    "types": "types_cmd",
    "check-service": "check_service_cmd",
    "cancel": "cancel_reschedule_cmd",
    "reschedule": "cancel_reschedule_cmd",
    "alerts": "alerts_cmd",
    "schedule": "schedule_cmd",
    "services": "services_cmd",
}


class LazyGroup(TyperGroup):
    """The ``sas`` group: the commands defined in main.py are built with it, the others when
    first asked for (by name, or all of them for the help's list)."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*(name for name in self.commands if name not in COMMAND_MODULES), *COMMAND_MODULES]

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            self.commands.update(load(module, self.rich_markup_mode))
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as err:
            # typer suggests from the commands built so far; a mistyped name builds none.
            close = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if self.suggest_commands and close and "Did you mean" not in err.message:
                err.message = f"{err.message.rstrip('.')}. Did you mean {', '.join(map(repr, close))}?"
            raise


def load(module_name: str, rich_markup_mode: Any) -> dict[str, Any]:
    """The click commands that ``sas.cli.<module_name>`` registers, by name."""
    # The import statement's own machinery, not importlib.import_module: `python -X importtime` lists it.
    module = __import__(f"sas.cli.{module_name}", fromlist=["register"])
    holder = typer.Typer(rich_markup_mode=rich_markup_mode, pretty_exceptions_enable=False)
    module.register(holder)
    built = get_group(holder).commands
    for command in built.values():
        plain_flags(command)
    return dict(built)


def plain_flags(cmd: Any) -> None:
    """Flags shown as flags in the help (typer 0.29 gives every boolean option, ``--help``
    included, a ``<bool>`` metavar, as if it took a value), each defaulting to False: typer
    coerces a None through pydantic (a group's ``--help`` not given is None), which would load
    pydantic for every ``sas COMMAND --help``. Applied to ``cmd`` and the commands it holds."""
    help_option = cmd.get_help_option(Context(cmd))
    for param in [*cmd.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False):
            param.metavar = "" if param.metavar is None else param.metavar
            param.default = False if param.default is None else param.default
    for sub in getattr(cmd, "commands", {}).values():
        plain_flags(sub)
