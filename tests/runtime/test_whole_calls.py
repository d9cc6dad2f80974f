"""A call carries the task's input as its submitter gave it, and its Agent reads it whole: the
worker fills the defaults in again from the task type's input model (sas/runtime/whole_calls.py).
In Temporal's time-skipping environment with fake Agents, and on the rules alone."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel, Field
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
from sas.client.inputs import validate_input
from sas.payload_codec import data_converter
from sas.runtime.whole_calls import task_types_of, whole_call, with_defaults
from sas.task_models import MirrorStamp, StepCall
from sas.task_models.outbound import OutboundPolicy
from sas.workflows.inputs import given_fields
from sas_orders.models import OrderInput
from sas_orders.workflows import OrderWorkflow

GIVEN: dict[str, Any] = {
    "customer_id": "c-1",
    "sku": "BOOK-1",
    "quantity": 1,
    "amount_cents": 1299,
    "address": "1 Main St",
}
LEAN = data_converter(None).payload_converter
DEFAULTS = {"callback_url": None, "currency": "EUR", "card": "4242424242424242", "parcels": 1}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def call(payload: dict[str, object], **changes: object) -> StepCall:
    base = StepCall(
        task_id="t-1",
        task_type="order",
        step="charge",
        position=1,
        idempotency_key="t-1:charge",
        payload=payload,
        stamp=MirrorStamp(seq=1),
    )
    return base.model_copy(update=changes)


RUN = "run-1"


def own_call(**changes: object) -> StepCall:
    """A call the first run of task t-1 makes (its chain is that run)."""
    made: dict[str, object] = {"stamp": MirrorStamp(seq=4, chain_id=RUN), "seal": "s", **changes}
    payload = made.pop("payload", GIVEN)
    assert isinstance(payload, dict)
    return call(payload, **made)


@pytest.mark.parametrize(
    "made",
    [own_call(), own_call(compensation=True, idempotency_key="t-1:charge:undo", target_key="t-1:charge")],
    ids=["forward", "undo"],
)
def test_a_compact_call_leaves_out_the_names_its_run_gives_and_reads_back_whole(made: StepCall) -> None:
    compact = made.compact_for("t-1", RUN)
    sent = json.loads(LEAN.to_payloads([compact])[0].data)
    assert not {"task_id", "task_type", "idempotency_key", "target_key"} & set(sent)
    assert sent["stamp"] == {"seq": 4} and sent["seal"] == "s" and sent["step"] == "charge"
    assert compact.whole_from("t-1", RUN, "order") == made
    assert made.whole_from("other", "other-run", "other") is made  # a whole call is as it came


@pytest.mark.parametrize(
    "made",
    [
        own_call(item_key="e-1", task_id="t-1", stamp=MirrorStamp(seq=4, chain_id="parent-run")),
        own_call(stamp=MirrorStamp(seq=4, chain_id="first-run")),
        own_call(idempotency_key="t-1#2:charge"),
        own_call(task_id="t-0", idempotency_key="t-0:charge"),
        own_call(stamp=MirrorStamp(seq=4)),
    ],
    ids=["a fan-out item", "a later run of the chain", "a later incarnation's key", "a clean-up's undo", "no chain"],
)
def test_a_call_whose_names_its_run_does_not_give_is_sent_whole(made: StepCall) -> None:
    assert made.compact_for("t-1", RUN) is made


def test_the_agents_worker_fills_in_a_compact_calls_names_from_temporal_and_its_type_by_workflow() -> None:
    types = task_types_of([OrderWorkflow])
    assert types.by_workflow == {"OrderWorkflow": "order"}
    compact = own_call().compact_for("t-1", RUN)
    info = dataclasses.replace(
        ActivityEnvironment.default_info(), workflow_id="t-1", workflow_run_id=RUN, workflow_type="OrderWorkflow"
    )
    whole = whole_call(types, compact, info)
    assert whole == own_call(payload={**GIVEN, **DEFAULTS})
    # A standalone activity (no workflow) gets no names: its seal, made over them, fails.
    alone = whole_call(
        types, compact, dataclasses.replace(info, workflow_id=None, workflow_run_id=None, workflow_type=None)
    )
    assert alone.task_id == "" and alone.task_type == ""


def test_an_agent_reads_the_whole_input_its_call_carried_in_part() -> None:
    models = task_types_of([OrderWorkflow]).input_models
    assert with_defaults(models, call(GIVEN)).payload == {**GIVEN, **DEFAULTS}
    # What the submitter set, even to a default's value, stays as it was set.
    chosen = {**GIVEN, "currency": "USD", "parcels": 3}
    assert with_defaults(models, call(chosen)).payload == {**DEFAULTS, **chosen}


def test_what_is_not_a_whole_task_input_is_left_as_it_came() -> None:
    models = task_types_of([OrderWorkflow]).input_models
    item = call({"employee": "e-1"}, item_key="e-1")
    assert with_defaults(models, item) is item  # a fan-out item's payload is the item
    other = call(GIVEN, task_type="preorder")
    assert with_defaults(models, other) is other  # a type this worker does not run
    broken = call({"sku": "BOOK-1"})
    assert with_defaults(models, broken) is broken  # the Agent says what is wrong with it, as before
    whole = call({**GIVEN, **DEFAULTS})
    assert with_defaults(models, whole) is whole


class Stamped(BaseModel):
    sku: str
    currency: str = "EUR"
    request_id: str = Field(default_factory=lambda: uuid.uuid4().hex)


def test_a_value_a_default_factory_made_travels_and_a_plain_default_does_not() -> None:
    made = Stamped(sku="B-1")
    assert given_fields(made) == {"sku", "request_id"}
    # Made once, where the input was read: never made again by a worker or a replay.
    again = Stamped.model_validate(made.model_dump(include=set(given_fields(made))))
    assert again.request_id == made.request_id


def test_the_client_sends_what_was_given_only() -> None:
    sent = validate_input("order", OrderInput(**GIVEN), OutboundPolicy())
    assert sent == GIVEN
    explicit = validate_input("order", {**GIVEN, "currency": "EUR"}, OutboundPolicy())
    assert explicit == {**GIVEN, "currency": "EUR"}


async def test_an_orders_calls_carry_the_given_input_and_its_agents_read_it_whole(env: WorkflowEnvironment) -> None:
    agents = FakeAgents()
    task_id = f"given-{uuid.uuid4().hex[:8]}"
    result = await run_task(env, OrderWorkflow, dict(GIVEN), agents, task_id=task_id)
    assert result.state == TaskState.PROCESSED
    assert [call.payload for _, call in agents.calls] == [{**GIVEN, **DEFAULTS}] * 3
    history = await env.client.get_workflow_handle(task_id).fetch_history()
    carried = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            (sent,) = await env.client.data_converter.decode(scheduled.input.payloads, [StepCall])
            carried.append(sent)
    assert [sent.payload for sent in carried] == [GIVEN] * 3
    # The test kit writes compact plans, so its calls are compact too, and read whole.
    assert {sent.task_id for sent in carried} == {""}
    assert [(c.task_id, c.idempotency_key) for _, c in agents.calls] == [
        (task_id, f"{task_id}:{step}") for step in ("reserve", "charge", "ship")
    ]
