"""docs/task-types.md's REST call and its summary and details, exactly as printed: the printed
`HttpCall` is the one `tests/e2e/rest_booking.py` runs on a dev server (so the call a reader
copies is the call that was run), and the printed story module, run over an order, gives the
UI's line and the story the docs say it gives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sas.api import StepContext, TaskDefinition
from sas.workflows.summaries import declared_summary, task_summary
from sas_orders.models import OrderInput
from sas_orders.steps import CHARGE, RESERVE, SHIP

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "task-types.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/task-types.md has no single block starting {first_line!r}"
    return blocks[0]


def test_the_printed_rest_call_is_the_one_the_dev_server_test_runs() -> None:
    call = printed('HttpCall(\n    ROOMS,\n    "PUT"')
    source = (ROOT / "tests" / "e2e" / "rest_booking.py").read_text()
    indented = "".join(f"    {line}\n" if line else "\n" for line in call.rstrip("\n").split("\n"))
    assert indented.strip() in source, "the docs' HttpCall differs from tests/e2e/rest_booking.py's"


def test_the_printed_summary_and_details_say_what_the_docs_say() -> None:
    namespace: dict[str, Any] = {
        "TaskDefinition": TaskDefinition,
        "OrderInput": OrderInput,
        "RESERVE": RESERVE,
        "CHARGE": CHARGE,
        "SHIP": SHIP,
    }
    exec(compile(printed("# my_team/story.py"), "my_team/story.py", "exec"), namespace)
    order: TaskDefinition = namespace["ORDER"]
    payload = {
        "customer_id": "c-1",
        "sku": "BOOK-1",
        "quantity": 2,
        "amount_cents": 2598,
        "currency": "EUR",
        "address": "1 Main St",
    }
    assert declared_summary(order, payload) == "2 × BOOK-1 · 25.98 EUR"
    assert task_summary(order, "o-1", payload) == "order o-1 · 2 × BOOK-1 · 25.98 EUR · reserve → charge → ship"
    story = order.details
    assert callable(story)
    assert story(StepContext(input=payload, results={})) == "Nothing charged yet."
    assert story(StepContext(input=payload, results={"charge": {"charge_id": "ch_1"}})) == "Charged: ch_1"
