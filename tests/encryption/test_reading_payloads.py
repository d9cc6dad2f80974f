"""sas's JSON converter reads every payload as Temporal's pydantic converter does, without
making a type adapter for each workflow run: the SDK makes a new converter for every run, so an
adapter made per converter was made again by every run (``sas/payload_codec/converter.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import temporalio.contrib.pydantic as sdk_pydantic
from pydantic import TypeAdapter, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter

from sas.payload_codec.converter import LeanJSONPayloadConverter
from sas.task_models import AcceptOutcome, StepResult
from sas_orders.models import OrderInput


def payload(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


ORDER = {"customer_id": "c-1", "sku": "BOOK-1", "quantity": 1, "amount_cents": 1299, "address": "1 Main St"}
READS: list[tuple[object, Any]] = [
    ({"any": [1, 2.5, "x", None, True]}, None),
    ({"any": {"nested": [1]}}, Any),
    ({"data": {"a": 1}, "seal": "s"}, StepResult),
    ({"status": "new"}, AcceptOutcome),
    (ORDER, OrderInput),
    ([{"data": {}, "seal": "a"}, {"data": {"b": 2}, "seal": "b"}], list[StepResult]),
    ({"x": 1}, dict[str, int]),
]


@pytest.mark.parametrize(("value", "hint"), READS)
def test_reads_what_the_sdks_pydantic_converter_reads(value: object, hint: Any) -> None:
    ours = LeanJSONPayloadConverter().from_payload(payload(value), hint)
    theirs = PydanticJSONPlainPayloadConverter().from_payload(payload(value), hint)
    assert ours == theirs
    assert type(ours) is type(theirs)


@pytest.mark.parametrize(
    ("value", "hint"), [({"status": "maybe"}, AcceptOutcome), ({"data": 1}, StepResult), ([1], list[StepResult])]
)
def test_refuses_what_the_sdks_pydantic_converter_refuses(value: object, hint: Any) -> None:
    with pytest.raises(ValidationError):
        PydanticJSONPlainPayloadConverter().from_payload(payload(value), hint)
    with pytest.raises(ValidationError):
        LeanJSONPayloadConverter().from_payload(payload(value), hint)


def test_a_new_converter_makes_no_type_adapter_for_plain_json_or_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []

    def counted(hint: Any, *args: Any, **kwargs: Any) -> TypeAdapter[Any]:
        made.append(hint)
        return TypeAdapter(hint, *args, **kwargs)

    # The SDK's converter makes its adapters through this name, cached per converter instance.
    monkeypatch.setattr(sdk_pydantic, "TypeAdapter", counted)
    for _ in range(3):  # three workflow runs, each with a converter of its own
        converter = LeanJSONPayloadConverter()
        converter.from_payload(payload(ORDER), None)
        converter.from_payload(payload({"status": "new"}), AcceptOutcome)
        converter.from_payload(payload({"data": {}, "seal": "s"}), StepResult)
    assert made == []
    # Any other hint is the SDK's to read, with the adapter it makes (the count does count).
    LeanJSONPayloadConverter().from_payload(payload({"x": 1}), dict[str, int])
    assert made == [dict[str, int]]
