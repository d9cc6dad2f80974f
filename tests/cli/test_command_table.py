"""``sas`` builds a command only when it is asked for (sas/cli/commands.py): its table of which
module holds each command is what the modules register, ``sas --help`` still lists every command
in that order, and a mistyped command is still told the close names. What each command imports
is tests/cli/test_startup_imports.py's."""

from __future__ import annotations

import re
import sys

import typer
from typer.main import get_command_name

from sas.cli.commands import COMMAND_MODULES
from tests import cli_process

# The commands main.py defines itself (the processes of the stack), listed first.
BUILT_IN = ["migrate", "setup", "worker", "supervisor"]


def sas(*args: str) -> tuple[int, str]:
    done = cli_process.run([sys.executable, "-m", "sas.cli.main", *args], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def test_the_table_names_what_each_module_registers() -> None:
    registered: dict[str, str] = {}
    for module_name in sorted(set(COMMAND_MODULES.values())):
        module = __import__(f"sas.cli.{module_name}", fromlist=["register"])
        holder = typer.Typer()
        module.register(holder)
        names = [c.name or get_command_name(c.callback.__name__) for c in holder.registered_commands if c.callback]
        names += [g.name for g in holder.registered_groups if g.name]
        assert names, module_name
        registered |= dict.fromkeys(names, module_name)
    assert registered == COMMAND_MODULES


def test_help_lists_every_command_in_the_table_order() -> None:
    code, out = sas("--help")
    assert code == 0, out
    listed = re.findall(r"^  (\S+)\s{2,}\S", out.split("Commands:", 1)[1], re.M)
    assert listed == [*BUILT_IN, *COMMAND_MODULES]


def test_a_mistyped_command_is_told_the_close_names() -> None:
    # The close name's module is not loaded yet when the typo is read: the names come from the table.
    code, out = sas("lst")
    assert code == 2 and "No such command 'lst'. Did you mean 'list'?" in out, out
    code, out = sas("migrat")
    assert code == 2 and "Did you mean 'migrate'?" in out, out
