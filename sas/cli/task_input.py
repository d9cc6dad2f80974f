"""A task's type and input as ``sas submit`` and ``sas schedule create`` take them: ``--type``
(required: sas has no task type of its own), a JSON file (``--input FILE``, ``-`` for stdin)
and ``--set FIELD=VALUE`` for any field of the type's input model, on top of the file.

A ``--set`` value is JSON when it parses as JSON (``quantity=2``, ``gift=true``,
``tags=["a","b"]``), else the text as given (``address=1 Main St``); where the field is text,
a value that parsed as a number or a boolean is taken as the text given (``card=4242...``). A
dotted name sets a nested field (``shipping.city=Oslo``). No command has a flag of a task
type's own: a flag that is not the command's is refused in one line that points at ``--set``
(``InputCommand``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand

from sas.cli.output import CliError

if TYPE_CHECKING:
    from sas.task_models.outbound import OutboundPolicy

# A field name as Python and JSON models write it; dots step into nested objects.
_SET = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)", re.S)
# pydantic's words when a text field is given a number or a boolean.
_NOT_TEXT = "Input should be a valid string"

SET_OPTION = typer.Option(
    [],
    "--set",
    metavar="FIELD=VALUE",
    help="A field of the task input, once per field, over the file's: JSON if it parses, else text; "
    "a.b=1 sets a nested field.",
)


class InputCommand(TyperCommand):
    """A command that takes a task's input: a flag it does not have is refused in one line that
    says how to give the field instead, never taken as something else."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from typer._click.exceptions import NoSuchOption  # typer's own click: not re-exported

        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as err:
            field = err.option_name.lstrip("-").replace("-", "_") or "FIELD"
            raise CliError(
                f"{err.option_name}: no such flag of `{_command_name(ctx)}`",
                f"give a field of the task input with --set {field}=VALUE, or in the --input file",
                code=2,
            ) from None


def _command_name(ctx: Any) -> str:
    """``sas submit``, ``sas schedule create``: as the user typed it, however sas was started."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["sas", *reversed(names)])


def require_type(task_type: str | None) -> str:
    """The ``--type`` given, known to be registered; CliError naming the registered ones if it
    is missing or unknown."""
    from sas.client.inputs import TASK_TYPES, unknown_task_type

    registered = ", ".join(TASK_TYPES) or "none"
    if task_type is None:
        raise CliError(
            "give the task type with --type TYPE",
            f"registered: {registered} (`sas types` lists them with their inputs)",
            code=2,
        )
    if task_type not in TASK_TYPES:
        raise CliError(f"--type {task_type!r}: unknown task type", unknown_task_type(task_type).hint)
    return task_type


def parse_sets(sets: Sequence[str]) -> dict[tuple[str, ...], str]:
    """Each ``--set FIELD=VALUE`` as (the field's path, the text of its value)."""
    parsed: dict[tuple[str, ...], str] = {}
    for item in sets:
        match = _SET.fullmatch(item)
        if match is None:
            raise CliError(f"--set {item!r}: use FIELD=VALUE", "e.g. --set quantity=2, or --set shipping.city=Oslo")
        path = tuple(match[1].split("."))
        if any(path[: i + 1] in parsed for i in range(len(path))) or any(p[: len(path)] == path for p in parsed):
            raise CliError(f"--set {match[1]}: given twice (or inside another --set)")
        parsed[path] = match[2]
    return parsed


def value_of(text: str) -> Any:
    """A ``--set`` value: JSON when it parses as JSON, else the text as given."""
    from sas.task_models.strict_json import StrictJsonError, loads_strict

    try:
        return loads_strict(text)
    except StrictJsonError:
        return text


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for depth, key in enumerate(path[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise CliError(f"--set {'.'.join(path)}: {'.'.join(path[: depth + 1])!r} is not an object in the input")
        node = child
    node[path[-1]] = value


def build_input(
    task_type: str,
    file: Path | None,
    sets: Sequence[str] = (),
    outbound: OutboundPolicy | None = None,
) -> dict[str, Any]:
    """The task input from a JSON file (or '-' for stdin) with each ``--set`` on top, validated
    by the type's model; its callback URL against ``outbound`` (default: SAS_OUTBOUND__* from
    the settings). A bad value is named as it was given: ``--set FIELD`` or the field in the file."""
    from sas.client.errors import InvalidInput
    from sas.client.inputs import validate_input

    task_type = require_type(task_type)
    assignments = parse_sets(sets)
    data = _read_input(file) if file is not None else {}
    values = {path: value_of(text) for path, text in assignments.items()}
    for path, value in values.items():
        _put(data, path, value)
    if outbound is None:
        from sas.settings import get_settings

        outbound = get_settings().outbound
    try:
        return validate_input(task_type, data, outbound)
    except InvalidInput as err:
        # A text field given what parsed as a number or a boolean: the text is what was meant.
        as_text = [path for loc, why in err.problems if why == _NOT_TEXT and (path := tuple(map(str, loc))) in values]
        if not as_text:
            raise _named(task_type, err, set(assignments), file) from None
        for path in as_text:
            _put(data, path, assignments[path])
        try:
            return validate_input(task_type, data, outbound)
        except InvalidInput as again:
            raise _named(task_type, again, set(assignments), file) from None


def _named(task_type: str, err: Any, given: set[tuple[str, ...]], file: Path | None) -> CliError:
    problems = "\n".join(f"  {_where(loc, given, file)}: {why}" for loc, why in err.problems)
    return CliError(
        f"invalid {task_type}:\n{problems}", "fix the values above; `sas types` shows the type's input fields"
    )


def _where(loc: tuple[Any, ...], given: set[tuple[str, ...]], file: Path | None) -> str:
    """Name a bad value as the user gave it: its --set, or its field in the JSON input."""
    path = tuple(map(str, loc))
    field = ".".join(path) or "input"
    for length in range(len(path), 0, -1):
        if path[:length] in given:
            return f"--set {'.'.join(path[:length])}"
    # A field that --set a.b made: `a` refused as a whole.
    inside = sorted(g for g in given if g[: len(path)] == path)
    if path and inside:
        return f"--set {'.'.join(inside[0])}"
    if file is not None:
        return f"{field!r} in " + ("the JSON input" if str(file) == "-" else str(file))
    return repr(field)


def _read_input(file: Path) -> dict[str, Any]:
    import sys

    from sas.task_models.strict_json import StrictJsonError, loads_strict

    if str(file) == "-":
        text = sys.stdin.read()
    else:
        try:
            text = file.read_text()
        except OSError as err:
            raise CliError(f"cannot read {file}: {err.strerror}") from None
    try:
        data = loads_strict(text)
    except StrictJsonError as err:
        raise CliError(f"{file}: not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise CliError(f"{file}: expected a JSON object, got {type(data).__name__}")
    return data
