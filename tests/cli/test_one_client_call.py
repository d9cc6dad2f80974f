"""Every ``sas`` command's work goes through the task client: a command module
(``sas/cli/*_cmd.py``) parses its flags, makes one ``TaskClient`` call, and prints. It reads no
state-store table, asks nothing of the Supervisor's code and builds no Temporal request of its
own, so a team's code calling ``TaskClient`` gets exactly what the command prints.

Read from the modules' source (every import, at the top or inside a function), so it holds for
the commands' paths no test runs too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "sas" / "cli"

# What does the work, and so belongs behind TaskClient (``sas.client.task_client``).
FORBIDDEN = ("sas.state_store", "sas.supervisor", "sas.breaker", "temporalio.client", "temporalio.service")
# From the task client's package only the client itself, its errors, the selection its bulk
# calls take (``Selection``, ``Action``, their bounds) and the types its calls return
# (annotations); its other modules are its own working parts.
CLIENT_PUBLIC = ("sas.client.task_client", "sas.client.errors", "sas.client.selection")

# (command module, imported module): why that command may, in one line each.
ALLOWED = {
    # `sas up` and `sas demo` start the stack and judge what it did from its own state store:
    # they run processes, not operations on a task.
    ("up_demo_cmd", "sas.state_store"),
    ("up_demo_cmd", "sas.state_store.queries"),
    ("up_demo_cmd", "sas.client.inputs"),
    # A task's story as plain data, for the tests and benchmarks that read it from a session of
    # their own: a name kept where they import it, not a read of the command.
    ("show_cmd", "sas.client.story"),
}
# Commands whose work is not behind TaskClient yet, each for what it still needs. Empty: every
# command is moved, and the test holds each. An entry names a (command module, imported module).
NOT_YET: set[tuple[str, str]] = set()


def imports(path: Path) -> list[tuple[str, bool]]:
    """Each module ``path`` imports, and whether only for annotations (``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for child in node.body for n in ast.walk(child)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "sas" or node.level:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                names = [node.module]
            found += [(name, id(node) in typing_only) for name in names]
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in typing_only) for a in node.names]
    return found


def violations(path: Path) -> list[str]:
    command = path.stem
    bad = []
    for module, for_types in imports(path):
        if (command, module) in ALLOWED | NOT_YET:
            continue
        does_work = any(module == f or module.startswith(f + ".") for f in FORBIDDEN)
        client_part = module.startswith("sas.client.") and module not in CLIENT_PUBLIC and not for_types
        if does_work or client_part:
            bad.append(module)
    return bad


# Besides the command modules, the modules that run a command's work for several of them: the
# bulk form of `sas retry | compensate | resubmit`.
SHARED_WORK = ("bulk.py",)


def command_modules() -> list[Path]:
    return sorted([*CLI.glob("*_cmd.py"), *(CLI / name for name in SHARED_WORK)])


def test_every_command_module_is_scanned() -> None:
    names = {p.stem for p in command_modules()}
    # The control: the commands that once read the store, the Supervisor or Temporal themselves.
    assert {"show_cmd", "list_cmd", "alerts_cmd", "incidents_cmd", "services_cmd", "status_cmd", "bulk"} <= names
    assert {command for command, _ in ALLOWED | NOT_YET} <= names


@pytest.mark.parametrize("path", command_modules(), ids=lambda p: p.stem)
def test_a_command_does_its_work_through_the_task_client(path: Path) -> None:
    assert violations(path) == [], (
        f"{path.name} imports what belongs behind TaskClient: call a TaskClient method instead"
    )


def test_the_scan_sees_a_read_of_the_store_inside_a_function(tmp_path: Path) -> None:
    # The check itself: an import inside a command's function is caught; one for annotations is not.
    module = tmp_path / "list_cmd.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sas.client.listing import TaskList\n"
        "def list_tasks():\n"
        "    from sas.state_store.queries import list_tasks\n"
        "    from sas.client.store import StateStore\n"
        "    from sas import state_store\n"
    )
    assert violations(module) == ["sas.state_store.queries", "sas.client.store", "sas.state_store"]
