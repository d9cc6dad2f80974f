"""A task type's own summary and details: shown as text, bounded, never failing the workflow,
left out with sas's neutral text when not declared; and checked when the type is loaded."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from markdown_it import MarkdownIt

from sas.api import StepContext, TaskDefinition
from sas.task_types.checks import definition_problem
from sas.workflows.definitions import MAX_SUMMARY
from sas.workflows.summaries import cleanup_summary, declared_details, task_details, task_story, task_summary
from tests.ui.story_types import GIFT, LABELLED

GIFT_INPUT = {"sku": "BOOK-1", "quantity": 2, "amount_cents": 45_000}


def declaring(**story: Any) -> TaskDefinition:
    return dataclasses.replace(GIFT, **story)


def test_without_a_declaration_sas_invents_no_amount_and_no_currency() -> None:
    texts = (
        task_summary(GIFT, "g-1", GIFT_INPUT),
        task_details(GIFT, "g-1", GIFT_INPUT),
        task_story(GIFT, "g-1", GIFT_INPUT, {}),
        cleanup_summary("gift", "g-1", GIFT_INPUT, GIFT),
    )
    assert texts[0] == "gift g-1 · reserve → charge"
    for text in texts:
        assert "450" not in text and "EUR" not in text and "BOOK-1" not in text, text


def test_a_template_names_the_inputs_fields() -> None:
    assert task_summary(LABELLED, "l-1", GIFT_INPUT) == "labelled l-1 · 2 of BOOK-1 as a gift · reserve → charge"


def test_what_a_type_answers_is_text_one_line_and_bounded() -> None:
    def phish(_: Mapping[str, Any]) -> str:
        return "[PAY HERE](https://evil.example)\n**Next:** " + "x" * 500

    line = task_summary(declaring(summary=phish), "g-2", GIFT_INPUT)
    html = MarkdownIt("commonmark").render(line)
    assert "<a " not in html and "<strong>" not in html and "\n" not in line
    assert len(line) <= 200
    told = declared_details(declaring(details=lambda ctx: "<b>a</b>\n\n" + "y\n" * 100), GIFT_INPUT, {})
    assert told is not None and "<b>" not in MarkdownIt("commonmark").render(told)
    assert told.count("\n\n") < 30  # paragraphs bounded


def test_a_summary_that_fails_leaves_the_neutral_text() -> None:
    def broken(order: Mapping[str, Any]) -> str:
        return str(order["currency"])  # the gift has none

    assert task_summary(declaring(summary=broken), "g-3", GIFT_INPUT) == "gift g-3 · reserve → charge"
    assert "**What:**" not in task_story(declaring(summary=broken, details=lambda ctx: 1 / 0), "g-3", GIFT_INPUT, {})


def test_details_see_the_input_and_the_results_so_far() -> None:
    def story(ctx: StepContext) -> str:
        return f"reserved {ctx.results['reserve']['reservation_id']} for {ctx.input['sku']}"

    shown = task_story(declaring(details=story), "g-4", GIFT_INPUT, {"reserve": {"reservation_id": "rsv-1"}})
    assert "reserved rsv-1 for BOOK-1" in shown
    # The static details are written once, at the start: results would go stale there.
    assert "reserved" not in task_details(declaring(details=story), "g-4", GIFT_INPUT)


async def _coroutine(_: Mapping[str, Any]) -> str:
    return ""


@pytest.mark.parametrize(
    ("story", "says"),
    [
        (
            {"summary": "{currency} {amount_cents}"},
            "{currency} is not a field of GiftInput (its fields: callback_url, sku, quantity, amount_cents)",
        ),
        ({"summary": "{sku.__class__}"}, "{sku.__class__} is not a field of GiftInput"),
        ({"summary": "{sku"}, "not a template"),
        ({"summary": "x" * (MAX_SUMMARY + 1)}, f"give a template of 1-{MAX_SUMMARY} characters"),
        ({"summary": _coroutine}, "summary=...: an async function"),
        ({"summary": lambda: "no argument"}, "summary=...: the function must take one argument"),
        ({"details": "not a function"}, "details=...: give a template or a function, not str"),
        ({"details": lambda a, b: ""}, "details=...: the function must take one argument"),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_when_the_type_loads(story: dict[str, Any], says: str) -> None:
    problem = definition_problem(declaring(**story))
    assert problem is not None and says in problem, problem


def test_the_order_example_and_a_template_keep_the_rules() -> None:
    from sas_orders.workflows import ORDER, PREORDER

    assert [definition_problem(d) for d in (ORDER, PREORDER, LABELLED, GIFT)] == [None] * 4
