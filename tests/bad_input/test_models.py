"""Model level: OrderInput, PreorderInput and task ids under generated input.

Valid input round-trips unchanged (as Python, as JSON and through Temporal's pydantic
data converter); invalid input raises a ValidationError/ValueError naming the field,
with a message of bounded size whatever the size of the input."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from sas.task_models import validate_task_id
from sas_orders.models import OrderInput, PreorderInput
from tests.bad_input.strategies import invalid_orders, invalid_task_ids, valid_orders, valid_task_ids

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS: dict[bool, type[OrderInput] | type[PreorderInput]] = {False: OrderInput, True: PreorderInput}


def _converter_round_trip(model: Any) -> Any:
    converter = pydantic_data_converter.payload_converter
    return converter.from_payloads(converter.to_payloads([model]), [type(model)])[0]


@pytest.mark.parametrize("preorder", [False, True], ids=["order", "preorder"])
@FAST
@given(data=st.data())
def test_valid_input_round_trips_unchanged(preorder: bool, data: st.DataObject) -> None:
    raw = data.draw(valid_orders(preorder=preorder))
    model = MODELS[preorder].model_validate(raw)
    # Nothing silently changed: every given field comes back as given.
    assert {k: getattr(model, k) for k in raw} == raw
    assert MODELS[preorder].model_validate(model.model_dump(mode="json")) == model
    assert MODELS[preorder].model_validate_json(model.model_dump_json()) == model
    assert _converter_round_trip(model) == model


@pytest.mark.parametrize("preorder", [False, True], ids=["order", "preorder"])
@FAST
@given(data=st.data())
def test_one_wrong_field_is_refused_naming_that_field(preorder: bool, data: st.DataObject) -> None:
    payload, field, how = data.draw(invalid_orders(preorder=preorder))
    with pytest.raises(ValidationError) as caught:
        MODELS[preorder].model_validate(payload)
    errors = caught.value.errors()
    assert [e["loc"][0] for e in errors] == [field], (how, errors)
    if how == "missing":
        assert errors[0]["type"] == "missing"
    if how == "extra":
        assert errors[0]["type"] == "extra_forbidden"
    text = str(caught.value)
    assert field in text
    # A 1 MB value is not echoed back whole: the message stays readable.
    assert len(text) < 2_000
    # The same payload as JSON is refused the same way.
    try:
        as_json = json.dumps(payload, allow_nan=True)
    except (TypeError, ValueError):
        return
    with pytest.raises(ValidationError) as again:
        MODELS[preorder].model_validate_json(as_json)
    assert [e["loc"][0] for e in again.value.errors()] == [field]


@pytest.mark.parametrize("not_an_object", [None, "order", 42, 1.5, [1, 2], ["customer_id", "c"], True])
def test_input_that_is_not_an_object_is_refused(not_an_object: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        OrderInput.model_validate(not_an_object)
    assert caught.value.errors()[0]["type"] in ("model_type", "model_attributes_type")


def test_a_one_megabyte_address_is_refused_with_a_short_message() -> None:
    payload = {"customer_id": "c", "sku": "S", "quantity": 1, "amount_cents": 5, "address": "é" * 1_000_000}
    with pytest.raises(ValidationError) as caught:
        OrderInput.model_validate(payload)
    assert [e["loc"] for e in caught.value.errors()] == [("address",)]
    assert "at most 500 characters" in str(caught.value) and len(str(caught.value)) < 1_000


@pytest.mark.parametrize("field", ["quantity", "amount_cents"])
def test_a_boolean_is_not_a_quantity_or_an_amount(field: str) -> None:
    payload = {"customer_id": "c", "sku": "S", "quantity": 1, "amount_cents": 5, "address": "x", field: True}
    with pytest.raises(ValidationError) as caught:
        OrderInput.model_validate(payload)
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]


# --- task ids ---------------------------------------------------------------------------


@FAST
@given(valid_task_ids)
def test_valid_task_ids_are_returned_unchanged(task_id: str) -> None:
    assert validate_task_id(task_id) is task_id


@FAST
@given(invalid_task_ids())
def test_invalid_task_ids_are_refused_with_a_printable_message(task_id: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_task_id(task_id)
    message = str(caught.value)
    assert message.startswith("invalid task id") and "1-128 characters" in message
    # Control characters are escaped, so a log line or terminal shows them rather than obeys them.
    assert not [c for c in message if unicodedata.category(c) == "Cc"]


@pytest.mark.parametrize("not_a_string", [None, 42, b"order-1", ["order-1"], {"id": "order-1"}])
def test_task_id_of_the_wrong_type_is_refused(not_a_string: Any) -> None:
    with pytest.raises(ValueError, match="task id must be a string, got"):
        validate_task_id(not_a_string)


def test_a_huge_task_id_gets_a_short_message() -> None:
    with pytest.raises(ValueError) as caught:
        validate_task_id("x" * 1_000_000)
    assert len(str(caught.value)) < 400
