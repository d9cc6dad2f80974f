"""JSON read at a boundary is standard JSON: ``NaN``, ``Infinity`` and numbers too large for a
float are refused in one line. Python's parser takes them; a NaN then reached a Temporal payload
as the non-JSON literal ``NaN``, and an infinity inside a dict field was dumped as ``null``.

Every path in keeps the one rule (``sas.workflows.inputs.json_problems``): the task client's
input (``validate_input``, which ``sas submit``, ``sas schedule create`` and ``TaskClient.submit``
go through), and every payload a workflow decodes: a task's input started by any client, the
operator's signals. The codec server's side is in tests/encryption/test_codec_server.py;
``TaskClient`` on a dev server in tests/client/test_json_numbers.py."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from sas.cli.output import CliError
from sas.cli.task_input import build_input
from sas.client.errors import InvalidInput
from sas.client.inputs import validate_input
from sas.settings import get_settings
from sas.task_models import TaskResult, TaskState
from sas.task_models.outbound import OutboundPolicy
from sas.task_models.strict_json import MAX_JSON_DEPTH, StrictJsonError, loads_strict
from sas.workflows import registry
from sas.workflows.inputs import json_problems
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id
from tests.stack import Stack, start_stack

HISTORIES = Path(__file__).resolve().parent / "histories"
NAN, INF = float("nan"), float("inf")
NOT_FINITE = "is not a JSON number; give a finite number"

ORDER = '{"customer_id": "c", "sku": "BOOK-7", "quantity": 1, "amount_cents": 100, "card": "4242424242424242", "address": "a"'


class Loose(BaseModel):
    """What a team's input model may hold: any JSON under a field."""

    extra: dict[str, Any]


@pytest.mark.parametrize(
    "text, named",
    [
        ('{"extra": {"x": NaN}}', "NaN"),
        ('{"extra": {"x": Infinity}}', "Infinity"),
        ('{"extra": {"x": [-Infinity]}}', "-Infinity"),
        ('{"extra": {"x": 1e999}}', "1e999"),
    ],
)
def test_non_finite_numbers_are_refused_in_one_line(text: str, named: str) -> None:
    # Before: parsed, then NaN kept (not JSON) and infinity dumped as null.
    with pytest.raises(StrictJsonError) as refused:
        Loose.model_validate(loads_strict(text)).model_dump(mode="json")
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_deep_nesting_is_refused_before_parsing() -> None:
    loads_strict("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)  # at the bound: taken
    with pytest.raises(StrictJsonError, match="nested deeper than"):
        loads_strict("[" * 100_000)
    # Brackets inside strings are text, however many.
    assert loads_strict('{"a": "' + "[" * 1000 + '\\"{"}') == {"a": "[" * 1000 + '"{'}


def test_sas_submit_refuses_nan_in_the_input_file(tmp_path: Path) -> None:
    file = tmp_path / "order.json"
    file.write_text(ORDER + ', "parcels": NaN}')
    with pytest.raises(CliError) as refused:
        build_input("order", file, (), OutboundPolicy())
    assert refused.value.message == f"{file}: not valid JSON: NaN is not a JSON number; give a finite number"
    file.write_text(ORDER + ', "parcels": 1}')
    assert build_input("order", file, (), OutboundPolicy())["parcels"] == 1


# --- the one rule ------------------------------------------------------------------


def test_the_rule_names_each_field_that_is_not_json() -> None:
    value = {"rate": NAN, "extra": {"x": [1, -INF], "ok": 1.5}, 3: "key", "when": {1, 2}}
    assert set(json_problems(value)) == {
        (("rate",), f"NaN {NOT_FINITE}"),
        (("extra", "x", 1), f"-Infinity {NOT_FINITE}"),
        (("3",), "an object key must be text, not int"),
        (("when",), "a set is not a JSON value"),
    }
    assert json_problems({"a": [True, None, "s", 1, 2.5, {"b": []}]}) == []
    # A caller's input before its model reads it: any value a model may take goes, numbers are checked.
    assert json_problems({"d": Decimal("Infinity"), "m": Loose(extra={"x": NAN}), "s": {1}}, loose=True) == [
        (("d",), f"Infinity {NOT_FINITE}"),
        (("m", "extra", "x"), f"NaN {NOT_FINITE}"),
    ]
    deep: list[Any] = []
    node = deep
    for _ in range(100_000):  # far past Python's recursion limit: walked without recursion
        node.append([])
        node = node[0]
    node.append(NAN)
    assert json_problems(deep)[0][1] == f"NaN {NOT_FINITE}"


# --- the task client's input ---------------------------------------------------------


@pytest.fixture
def rated_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tests/bad_input/rated.py registered beside the installed types: a float field and a dict of anything."""
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.bad_input.rated")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest.mark.parametrize(
    "given, named, said",
    [
        ({"rate": NAN}, "'rate'", "NaN"),
        ({"rate": -INF}, "'rate'", "-Infinity"),
        # pydantic would dump it as null: the input silently changed.
        ({"extra": {"x": INF}}, "'extra.x'", "Infinity"),
        ({"extra": {"x": [1, {"y": NAN}]}}, "'extra.x.1.y'", "NaN"),
        # JSON text, but the float field reads it as a NaN: refused as what would travel.
        ({"rate": "NaN"}, "'rate'", "NaN"),
        ({"rate": "-inf"}, "'rate'", "-Infinity"),
        ({"extra": {"d": Decimal("NaN")}}, "'extra.d'", "NaN"),
    ],
)
def test_the_task_client_refuses_a_non_finite_number_naming_the_field(
    rated_type: None, given: dict[str, Any], named: str, said: str
) -> None:
    # Before: {"rate": nan} went out as the payload {"rate": NaN}, an infinity in extra as null.
    with pytest.raises(InvalidInput) as refused:
        validate_input("rated", given, OutboundPolicy())
    assert refused.value.message == f"invalid rated:\n  {named}: {said} {NOT_FINITE}"
    assert refused.value.field == "payload"


def test_a_model_instance_is_held_to_the_same_rule(rated_type: None) -> None:
    from tests.bad_input.rated import RatedInput

    with pytest.raises(InvalidInput, match=r"'rate': NaN is not a JSON number"):
        validate_input("rated", RatedInput(rate=NAN), OutboundPolicy())
    with pytest.raises(InvalidInput, match=r"'extra.x': Infinity is not a JSON number"):
        validate_input("rated", RatedInput(extra={"x": INF}), OutboundPolicy())
    taken = validate_input("rated", RatedInput(rate=0.25, extra={"x": [1e300, -0.0]}), OutboundPolicy())
    assert taken == {"rate": 0.25, "extra": {"x": [1e300, -0.0]}}  # what was given: its defaults are the type's
    assert json.loads(json.dumps(taken, allow_nan=False)) == taken


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "nan", "inf"])
def test_sas_submit_refuses_a_non_finite_set_naming_the_flag(rated_type: None, value: str) -> None:
    # `--set rate=NaN` is not JSON, so it was taken as the text "NaN", which the float field read as NaN.
    with pytest.raises(CliError) as refused:
        build_input("rated", None, [f"rate={value}"], OutboundPolicy())
    message = refused.value.message
    assert message.startswith("invalid rated:\n  --set rate: ") and message.endswith(NOT_FINITE), message
    assert build_input("rated", None, ["rate=0.5", "extra.x=[1,2]"], OutboundPolicy())["rate"] == 0.5


def test_sas_submit_refuses_nan_in_a_file_field_of_any_json(rated_type: None, tmp_path: Path) -> None:
    file = tmp_path / "rated.json"
    file.write_text('{"extra": {"x": Infinity}}')
    with pytest.raises(CliError, match="not valid JSON: Infinity is not a JSON number"):
        build_input("rated", file, (), OutboundPolicy())
    file.write_text('{"rate": "Infinity"}')  # JSON, but a float field reads it as infinity
    with pytest.raises(CliError) as refused:
        build_input("rated", file, (), OutboundPolicy())
    assert refused.value.message == f"invalid rated:\n  'rate' in {file}: Infinity {NOT_FINITE}"


# --- the workflow's decoding ---------------------------------------------------------


@pytest_asyncio.fixture
async def rated_stack(
    rated_type: None, client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as running:
        yield running


async def refused_at_once(stack: Stack, payload: dict[str, Any]) -> str:
    """The message of a RatedWorkflow started (by any client, not sas's) with ``payload``,
    which must fail at once, non-retryably, with nothing run or recorded."""
    handle = await stack.submit(fresh_id("rated"), payload, workflow="RatedWorkflow")
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput" and cause.non_retryable, cause
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [
        e.marker_recorded_event_attributes for e in history.events if e.HasField("marker_recorded_event_attributes")
    ]
    assert [m.marker_name for m in markers] == ["core_patch"]  # the refusal's patch, and nothing run
    assert await stack.record(handle.id) is None
    return cause.message


async def test_a_workflow_started_with_a_non_finite_number_fails_at_once_naming_the_field(
    rated_stack: Stack,
) -> None:
    # Sent as another client would: pydantic's converter writes a NaN as the literal NaN.
    # Before: the task was accepted and ran, its input holding NaN (or null for the infinity).
    assert await refused_at_once(rated_stack, {"rate": NAN}) == f"invalid rated input: rate: NaN {NOT_FINITE}"
    assert await refused_at_once(rated_stack, {"extra": {"x": [INF]}}) == (
        f"invalid rated input: extra.x[0]: Infinity {NOT_FINITE}"
    )
    # A text the model reads as a number ("NaN" for a float) is held to standard JSON too.
    assert await refused_at_once(rated_stack, {"rate": "NaN"}) == f"invalid rated input: rate: NaN {NOT_FINITE}"
    assert await refused_at_once(rated_stack, {"rate": "-inf"}) == f"invalid rated input: rate: -Infinity {NOT_FINITE}"
    handle = await rated_stack.submit(fresh_id("rated"), {"rate": 0.5, "extra": {"x": [1]}}, workflow="RatedWorkflow")
    assert (await handle.result()).state == TaskState.PROCESSED
    history = await handle.fetch_history()
    # The patch is asked only of a payload it refuses: a good task carries no marker of it.
    markers = [
        e.marker_recorded_event_attributes for e in history.events if e.HasField("marker_recorded_event_attributes")
    ]
    assert not [m for m in markers if m.marker_name == "core_patch"]  # the others are local activities


RECORDED_BEFORE = HISTORIES / "rated_nan_accepted_before_strict_json.json"


async def test_a_workflow_that_took_a_nan_before_the_rule_replays_as_it_ran() -> None:
    """Recorded on the code before the rule: a RatedWorkflow started with {"rate": NaN} was
    accepted and completed. The rule is behind a patch, so that history still replays."""
    from tests.bad_input.rated import RatedWorkflow

    events = json.loads(RECORDED_BEFORE.read_text())
    started = events["events"][0]["workflowExecutionStartedEventAttributes"]
    assert b'"rate":NaN' in base64.b64decode(started["input"]["payloads"][0]["data"])
    history = WorkflowHistory.from_json(started["workflowId"], events)
    replayer = Replayer(workflows=[RatedWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
async def test_record_a_workflow_that_took_a_nan(rated_stack: Stack) -> None:
    """Run on the code before the rule (it records what that code did)."""
    handle = await rated_stack.submit(fresh_id("rated-nan"), {"rate": NAN}, workflow="RatedWorkflow")
    result = await handle.result()
    assert result.state == TaskState.PROCESSED and isinstance(result, TaskResult)
    history = await handle.fetch_history()
    HISTORIES.mkdir(exist_ok=True)
    RECORDED_BEFORE.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
