"""The calls, results and plans a task's history carries leave their None fields out, and the
fields whose default says nothing happened at that default, and read back the same: with this
code, and with a worker's that writes every field (an older one)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field
from temporalio.contrib.pydantic import pydantic_data_converter

import sas.task_models as task_models
from sas.payload_codec import data_converter
from sas.task_models import (
    MirrorStamp,
    StepCall,
    StepPlan,
    StepPolicyValues,
    StepResult,
    StepStatus,
    TaskPlan,
    TaskResult,
    TaskState,
    TaskStatus,
)

LEAN = data_converter(None).payload_converter
FULL = pydantic_data_converter.payload_converter


def call() -> StepCall:
    return StepCall(
        task_id="t-1",
        task_type="order",
        step="charge",
        position=1,
        idempotency_key="t-1:charge",
        payload={"callback_url": None, "sku": "B-1"},
        stamp=MirrorStamp(seq=3, chain_id="c"),
        results={"reserve": {"reservation_id": "r-1", "note": None}},
        seal="s",
    )


def plan() -> TaskPlan:
    policy = StepPolicyValues()
    steps = [
        StepPlan(name="reserve", position=0, agent="inventory.reserve", idempotency_key="t-1:reserve", policy=policy)
    ]
    return TaskPlan(steps=steps, compensation_policy=policy, supervisor_workflow_id="sup")


def result() -> TaskResult:
    steps = [StepStatus(name="reserve", position=0, state="Processed", runs=1, result={"reservation_id": "r-1"})]
    return TaskResult(task_id="t-1", state=TaskState.PROCESSED, steps=steps)


def written(value: Any) -> dict[str, Any]:
    [payload] = LEAN.to_payloads([value])
    return json.loads(payload.data)


def test_none_fields_are_left_out_at_every_level() -> None:
    sent = written(call())
    assert "target_key" not in sent and "forward_result" not in sent and "item_key" not in sent
    assert "task_state_on_done" not in sent["stamp"]
    accepted = written(plan())
    assert "refused" not in accepted and "heartbeat_s" not in accepted["compensation_policy"]
    assert not {"compensation", "task_queue", "stage", "pivot"} & set(accepted["steps"][0])
    assert "heartbeat_s" not in accepted["steps"][0]["policy"]
    ended = written(result())
    assert not {"last_error", "error_type", "note", "wait_until", "waits_for", "stage"} & set(ended["steps"][0])


def test_what_is_not_none_is_kept_and_a_task_input_is_left_as_it_is() -> None:
    sent = written(call())
    # A team's own data (the input, an earlier result) keeps its None values: its models are not ours.
    assert sent["payload"] == {"callback_url": None, "sku": "B-1"}
    assert sent["results"] == {"reserve": {"reservation_id": "r-1", "note": None}}
    assert sent["seal"] == "s" and sent["stamp"]["seq"] == 3
    assert written(plan())["steps"][0]["policy"]["max_attempts"] == 3


def test_lean_payloads_read_back_the_same_here_and_by_a_full_writer() -> None:
    for value in (call(), plan(), result(), StepResult(data={"id": "x"}, seal="s")):
        model = type(value)
        [lean] = LEAN.to_payloads([value])
        [full] = FULL.to_payloads([value])
        assert len(lean.data) < len(full.data) or model is StepResult
        assert LEAN.from_payloads([lean], [model]) == [value]
        assert FULL.from_payloads([lean], [model]) == [value]  # an older worker reads it
        assert LEAN.from_payloads([full], [model]) == [value]  # and this one reads an older worker's


class _Defaulted(BaseModel):
    history_omits_none: ClassVar[bool] = True
    given: int | None = 5
    unset: int | None = None


def test_a_none_whose_default_is_not_none_is_kept() -> None:
    # Left out, it would read back as 5.
    value = _Defaulted(given=None)
    assert written(value) == {"given": None}
    assert LEAN.from_payloads(LEAN.to_payloads([value]), [_Defaulted]) == [value]


def test_models_that_do_not_ask_keep_every_field() -> None:
    status = TaskStatus(task_id="t-1", task_type="order", state=TaskState.PROCESSED, steps=result().steps)
    shown = written(status)
    assert shown["current_step"] is None and shown["steps"][0]["last_error"] is None


def test_the_lean_converter_is_a_pydantic_one_to_whoever_checks() -> None:
    from temporalio.contrib.pydantic import PydanticPayloadConverter

    assert issubclass(data_converter(None).payload_converter_class, PydanticPayloadConverter)


# Each field a history leaves out at its default, and that default: what every release that
# wrote such a history reads back. Changing one would rewrite every recorded history's meaning.
PINNED = {
    ("MirrorStamp", "failure_count"): 0,
    ("StepCall", "compensation"): False,
    ("StepCall", "results"): {},
    # Empty only in a compact call, whose worker reads them from Temporal (StepCall.whole_from).
    ("StepCall", "task_id"): "",
    ("StepCall", "task_type"): "",
    ("StepCall", "idempotency_key"): "",
    ("StepResult", "replayed"): False,
    # A task's first incarnation; each resubmission counts up from it.
    ("TaskPlan", "incarnation"): 1,
    ("StepStatus", "failure_count"): 0,
    ("StepStatus", "permanent"): False,
}


def test_the_fields_left_out_at_their_default_are_facts_whose_default_never_changes() -> None:
    declared = {
        (model.__name__, name): model.model_fields[name].get_default(call_default_factory=True)
        for model in vars(task_models).values()
        if isinstance(model, type) and issubclass(model, BaseModel)
        for name in getattr(model, "history_omits_at_default", ())
    }
    assert declared == PINNED


def test_a_fact_at_its_default_is_left_out_and_kept_otherwise() -> None:
    sent = written(call())
    assert "compensation" not in sent and "failure_count" not in sent["stamp"]
    assert sent["results"] == {"reserve": {"reservation_id": "r-1", "note": None}}
    first = call().model_copy(update={"results": {}, "stamp": MirrorStamp(seq=3, failure_count=2)})
    assert "results" not in written(first) and written(first)["stamp"]["failure_count"] == 2
    undo = call().model_copy(update={"compensation": True})
    assert written(undo)["compensation"] is True
    assert written(StepResult(data={"id": "x"})) == {"data": {"id": "x"}}
    assert written(StepResult(data={"id": "x"}, replayed=True))["replayed"] is True
    [step] = written(result())["steps"]
    assert "failure_count" not in step and "permanent" not in step and step["runs"] == 1
    failed = StepStatus(name="charge", position=1, state="Failed", failure_count=3, permanent=True)
    kept = written(TaskResult(task_id="t-1", state=TaskState.COMPENSATED, steps=[failed]))["steps"][0]
    assert kept["failure_count"] == 3 and kept["permanent"] is True
    for value in (first, undo, StepResult(data={}, replayed=True)):
        assert FULL.from_payloads(LEAN.to_payloads([value]), [type(value)]) == [value]


def test_a_models_defaults_are_asked_once_not_at_every_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    # Asking pydantic for a default calls its factory and inspects the factory's signature: done
    # for every call and result a run converts, it was a share of every Scheduler's activation.
    from pydantic.fields import FieldInfo

    class _Fresh(BaseModel):  # a class of its own: no payload of it has been written yet
        history_omits_none: ClassVar[bool] = True
        history_omits_at_default: ClassVar[frozenset[str]] = frozenset({"results"})
        results: dict[str, Any] = Field(default_factory=dict)
        note: str | None = None

    asked = 0
    get_default = FieldInfo.get_default

    def counted(self: FieldInfo, *args: Any, **kwargs: Any) -> Any:
        nonlocal asked
        asked += 1
        return get_default(self, *args, **kwargs)

    monkeypatch.setattr(FieldInfo, "get_default", counted)
    for _ in range(5):
        assert written(_Fresh()) == {}
    assert written(_Fresh(results={"a": 1}, note="n")) == {"results": {"a": 1}, "note": "n"}
    assert asked == 1
