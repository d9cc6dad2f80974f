"""JSON read at a boundary is standard JSON: ``NaN``, ``Infinity`` and numbers too large for a
float are refused in one line. Python's parser takes them; a NaN then reached a Temporal payload
as the non-JSON literal ``NaN``, and an infinity inside a dict field was dumped as ``null``.
The codec server's side is in tests/encryption/test_codec_server.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from sas.cli.output import CliError
from sas.cli.task_input import build_input
from sas.task_models.outbound import OutboundPolicy
from sas.task_models.strict_json import MAX_JSON_DEPTH, StrictJsonError, loads_strict

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
