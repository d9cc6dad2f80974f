"""A service's error text, a signal's note and a task's input reach the UI's Markdown (current
details, task details, summaries) as text, never as markup: a service could otherwise put a real
link, or a false "Next:" line, beside sas's own instructions. Rendered with a CommonMark renderer,
as the UI renders them."""

from __future__ import annotations

from markdown_it import MarkdownIt

from sas.task_models import StepState, StepStatus, TaskState, TaskStatus
from sas.task_models.markdown import markdown_text
from sas.workflows.summaries import cleanup_details, current_details, step_summary, task_details
from sas_orders.workflows import ORDER

PHISH = "card declined [OPEN THE CARD FORM](https://evil.example/phish)"
FALSE_NEXT = "\n\n**Next:** call <b>+1 555</b> ![x](https://evil.example/pixel.png)"


def render(text: str) -> str:
    return MarkdownIt("commonmark").render(text)


def parked(error: str, note: str | None = None) -> TaskStatus:
    return TaskStatus(
        task_id="o-9",
        task_type="order",
        state=TaskState.ERROR,
        current_step="charge",
        needs_operator=True,
        steps=[
            StepStatus(
                name="charge",
                position=0,
                state=StepState.ERROR,
                runs=3,
                failure_count=3,
                last_error=error,
                error_type="PaymentDeclined",
            ),
            StepStatus(name="approval", position=1, state=StepState.WAITING, note=note),
        ],
    )


def test_a_service_error_is_shown_as_text_not_as_a_link_or_a_line_of_its_own() -> None:
    html = render(current_details(parked(PHISH + FALSE_NEXT, note="[click](http://evil.example)")))
    assert "<a " not in html and "<img" not in html and "<b>" not in html
    assert html.count("<strong>Next:</strong>") == 1  # sas's own, and no other
    # The text itself is still there, as the service wrote it (on one line).
    assert "card declined [OPEN THE CARD FORM](https://evil.example/phish) **Next:** call" in html


def test_the_input_and_a_clean_up_reason_are_text_too() -> None:
    payload = {"sku": "[BOOK](https://evil.example)", "quantity": 1, "amount_cents": 100, "currency": "<i>EUR</i>"}
    for text in (
        task_details(ORDER, "o-1", payload),
        step_summary("charge", "payment.charge", payload, run=1, failure_count=0),
        step_summary("reserve", "inventory.reserve", payload, run=1, failure_count=0),
        cleanup_details("o-1", PHISH + FALSE_NEXT),
    ):
        html = render(text)
        assert "<a " not in html and "<i>" not in html and "<img" not in html, text


def test_markdown_text_keeps_plain_text_and_breaks_every_kind_of_markup() -> None:
    # What sas's own texts hold is unchanged (recorded activity summaries stay the same).
    for plain in ("BOOK-1", "25.98 EUR", "HTTP 502 from payment: upstream timeout", "a-b.c (1/2) 50% + 3"):
        assert markdown_text(plain) == plain
    assert markdown_text("x\u202eevil\x1b[31m\r\nline") == "x evil \\[31m line"  # bidi, escapes, newlines
    # What a GFM renderer would link without brackets is broken, and still reads the same.
    linkless = markdown_text("see https://evil.example or www.evil.example")
    assert linkless == "see https\\://evil.example or www\\.evil.example"
    assert render(linkless).strip() == "<p>see https://evil.example or www.evil.example</p>"
    assert markdown_text("a" * 10, 5) == "aaaa…"
    assert render(markdown_text("*_`#|~<>!\\")).strip() == "<p>*_`#|~&lt;&gt;!\\</p>"
