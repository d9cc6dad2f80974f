"""A task's type and input on the command line: ``--type`` is required and names the registered
types when missing; the input comes from ``--input`` and ``--set FIELD=VALUE``, validated by the
type's model with each bad value named as it was given; a flag of another type's (an order's
``--amount-cents``) is refused in one line, never applied. Real ``sas`` processes, refused before
Temporal is asked (it is not up); one submission end to end on the test stack."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from sas.cli.output import CliError
from sas.cli.task_input import build_input
from sas.task_models.outbound import OutboundPolicy
from tests.cli.test_cli import sas
from tests.cli.test_first_week import run_sas
from tests.helpers import fresh_id
from tests.stack import Stack

TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 3}
ORDER = {"customer_id": "c-1", "sku": "BOOK-1", "quantity": 1, "amount_cents": 100, "address": "1 Main St"}


def printed(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("command", [["submit"], ["schedule", "create", "s-1", "--every", "1d"]])
@pytest.mark.parametrize("flag", [["--amount-cents", "777"], ["--card", "4000000000000002"], ["--sku", "X"]])
def test_an_order_flag_with_another_type_is_refused_in_one_line(
    tmp_path: Path, command: list[str], flag: list[str]
) -> None:
    (tmp_path / "t.json").write_text(json.dumps(TRIP))
    done = run_sas(tmp_path, *command, "--type", "trip", "--input", "t.json", *flag)
    assert done.returncode == 2, done.stderr
    field = flag[0].lstrip("-").replace("-", "_")
    name = "sas submit" if command == ["submit"] else "sas schedule create"
    assert printed(done.stderr) == [
        f"sas: {flag[0]}: no such flag of `{name}`",
        f"  give a field of the task input with --set {field}=VALUE, or in the --input file",
    ], done.stderr


@pytest.mark.parametrize("command", [["submit"], ["schedule", "create", "s-1", "--every", "1d"]])
def test_without_type_the_registered_types_are_named(tmp_path: Path, command: list[str]) -> None:
    done = run_sas(tmp_path, *command, "--set", "quantity=1")
    assert done.returncode == 2, done.stderr
    first, hint = printed(done.stderr)
    assert first == "sas: give the task type with --type TYPE"
    assert hint.startswith("  registered: ") and {"order", "preorder", "trip"} <= set(
        hint.removeprefix("  registered: ").split(" (")[0].split(", ")
    ), hint


@pytest.mark.parametrize("command", [["submit"], ["schedule", "create", "s-1", "--every", "1d"]])
def test_a_bad_set_value_is_named_as_given_before_temporal_is_asked(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "order.json").write_text(json.dumps(ORDER))
    given = ["--set", "quantity=0", "--set", "sku=NO SPACES", "--set", "colour=red"]
    done = run_sas(tmp_path, *command, "--type", "order", "--input", "order.json", *given)
    assert done.returncode == 1, done.stderr
    assert printed(done.stderr) == [
        "sas: invalid order:",
        "  --set sku: must be letters, digits, '.', '_' and '-' only",
        "  --set quantity: Input should be greater than 0",
        "  --set colour: not a field of this task type",
        "  fix the values above; `sas types` shows the type's input fields",
    ], done.stderr


def check(task_type: str, file: Path | None, *sets: str) -> dict[str, object]:
    return build_input(task_type, file, sets, OutboundPolicy())


def test_set_values_are_json_when_they_parse_else_text(tmp_path: Path) -> None:
    built = check("order", None, *(f"{k}={v}" for k, v in ORDER.items()), "parcels=2", "currency=USD")
    assert built["quantity"] == 1 and built["parcels"] == 2 and built["amount_cents"] == 100
    assert built["address"] == "1 Main St" and built["currency"] == "USD"
    # Digits for a text field stay the text given, not a number the model refuses.
    assert check("order", None, *(f"{k}={v}" for k, v in ORDER.items()), "card=4000000000000002")["card"] == (
        "4000000000000002"
    )
    # JSON text for a number stays refused: "2" is not the integer 2 where the model is strict.
    with pytest.raises(CliError, match=r"--set quantity: Input should be a valid integer"):
        check("order", None, *(f"{k}={v}" for k, v in ORDER.items() if k != "quantity"), 'quantity="2"')


def test_set_goes_over_the_file_and_into_nested_fields(tmp_path: Path) -> None:
    file = tmp_path / "order.json"
    file.write_text(json.dumps(ORDER))
    assert check("order", file, "amount_cents=777")["amount_cents"] == 777
    # A nested field is made where it is missing; the model then refuses the unknown object by name.
    with pytest.raises(CliError) as refused:
        check("order", file, "gift.wrap=true")
    assert "  --set gift.wrap: not a field of this task type" in refused.value.message
    file.write_text(json.dumps({**ORDER, "note": "x"}))
    with pytest.raises(CliError, match=r"--set note\.text: 'note' is not an object in the input"):
        check("order", file, "note.text=hi")


@pytest.mark.parametrize(
    ("sets", "refused"),
    [
        (["quantity"], "--set 'quantity': use FIELD=VALUE"),
        (["=2"], "--set '=2': use FIELD=VALUE"),
        (["a..b=1"], "--set 'a..b=1': use FIELD=VALUE"),
        (["quantity=1", "quantity=2"], "--set quantity: given twice (or inside another --set)"),
        (["gift={}", "gift.wrap=1"], "--set gift.wrap: given twice (or inside another --set)"),
        (["gift.wrap=1", "gift={}"], "--set gift: given twice (or inside another --set)"),
    ],
)
def test_a_malformed_set_is_refused_in_one_line(sets: list[str], refused: str) -> None:
    with pytest.raises(CliError) as error:
        check("order", None, *sets)
    assert error.value.message == refused


def test_an_unknown_type_names_the_registered_ones() -> None:
    with pytest.raises(CliError) as error:
        check("parcel", None)
    assert error.value.message == "--type 'parcel': unknown task type"
    assert error.value.hint is not None and "order" in error.value.hint and "trip" in error.value.hint


async def test_submit_with_set_starts_the_task_with_those_values(stack: Stack, tmp_path: Path) -> None:
    task_id = fresh_id("cli-set")
    file = tmp_path / "order.json"
    file.write_text(json.dumps({**ORDER, "card": "4242424242424242"}))
    declined = ["--set", "card=4000000000000002", "--set", "quantity=3"]
    done = await sas(stack, "submit", "--type", "order", "--input", str(file), *declined, "--id", task_id, "--wait")
    assert done.returncode != 0 and "Compensated" in done.stdout, done.stdout + done.stderr  # the declined card
    record = await stack.record(task_id)
    assert record is not None and record.task.task_type == "order"
    assert record.task.payload["card"] == "4000000000000002" and record.task.payload["quantity"] == 3
    assert record.task.payload["address"] == ORDER["address"]  # the file's, where no --set changed it


def readme_submit() -> list[str]:
    """The Quick start's ``sas submit`` command, as printed (continued lines joined)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    text = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0].replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if line.startswith("sas submit ")]
    return shlex.split(line.split("#", 1)[0])[1:]


async def test_the_readme_quick_start_submit_runs_as_printed(stack: Stack) -> None:
    task_id = fresh_id("readme")
    done = await sas(stack, *readme_submit(), "--id", task_id, "--wait", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "Processed"
