"""The order is an example, a package of its own: no engine module names an order's field or the
order task type. Read in Python (the source files' text), so the check runs wherever the tests do."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ("sas", "workflows", "activities", "supervisor")
ORDER_WORDS = re.compile(r'amount_cents|sku|customer_id|"order"')


def engine_files() -> list[Path]:
    files = [f for top in ENGINE for f in sorted((ROOT / top).rglob("*.py"))]
    return files


def test_no_engine_module_names_an_order_field_or_the_order_type() -> None:
    files = engine_files()
    assert len(files) > 100 and ROOT / "sas" / "cli" / "submit_cmd.py" in files  # the check sees the engine
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ORDER_WORDS.search(line)
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_an_order_word() -> None:
    assert ORDER_WORDS.search('flags = {"amount_cents": None}') and ORDER_WORDS.search('if task_type == "order":')
    assert not ORDER_WORDS.search("a task's amount, in cents")
