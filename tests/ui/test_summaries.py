"""The texts the UI shows: one line per task and per Agent call, and no secret in any of them."""

from __future__ import annotations

from sas.task_models import StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.summaries import (
    cleanup_summary,
    current_details,
    step_summary,
    task_details,
    task_story,
    task_summary,
)
from sas_orders.models import OrderInput
from sas_orders.workflows import ORDER, PREORDER

PAYLOAD = OrderInput(
    customer_id="cust-secret-77",
    sku="BOOK-1",
    quantity=2,
    amount_cents=2598,
    card="4000123412341234",
    address="12 Hidden Lane",
    callback_url="https://hooks.example.com/secret-path",
).model_dump(mode="json")
PRIVATE = ("4000123412341234", "cust-secret-77", "Hidden Lane", "secret-path")


def test_the_order_types_own_summary_gives_items_and_amount_in_its_currency() -> None:
    assert task_summary(ORDER, "o-123", PAYLOAD) == "order o-123 · 2 × BOOK-1 · 25.98 EUR · reserve → charge → ship"
    assert task_summary(PREORDER, "p-1", {**PAYLOAD, "amount_cents": 5, "currency": "USD"}) == (
        "preorder p-1 · 2 × BOOK-1 · 0.05 USD · reserve → charge"
    )


def test_agent_calls_say_what_they_do_and_which_run_it_is() -> None:
    # The input is the task type's to tell (in the task's summary and details), not each call's.
    assert step_summary("charge", "payment.charge", PAYLOAD, run=2, failure_count=1) == (
        "charge · run 2 · FailureCount 1"
    )
    assert step_summary("reserve", "inventory.release", PAYLOAD, run=1, failure_count=0, undo=True) == (
        "release (undo reserve) · run 1"
    )


def test_current_details_say_state_last_error_and_the_command_to_run() -> None:
    status = TaskStatus(
        task_id="o-9",
        task_type="order",
        state=TaskState.ERROR,
        current_step="charge",
        needs_operator=True,
        steps=[
            StepStatus(name="reserve", position=0, state=StepState.PROCESSED, runs=1),
            StepStatus(
                name="charge",
                position=1,
                state=StepState.ERROR,
                runs=3,
                failure_count=3,
                last_error="card declined",
                error_type="PaymentDeclined",
            ),
            StepStatus(name="ship", position=2),
        ],
    )
    text = current_details(status)
    assert "**Task state: Error** · needs an operator · FailureCount 3" in text
    assert "**Step:** charge (Error) · run 3" in text
    assert "**Last error** (charge, PaymentDeclined): card declined" in text
    assert "`sas retry o-9` or `sas compensate o-9`" in text


def test_no_text_carries_the_card_the_customer_the_address_or_the_callback() -> None:
    texts = [
        task_summary(ORDER, "o-1", PAYLOAD),
        task_details(ORDER, "o-1", PAYLOAD),
        cleanup_summary("order", "o-1", PAYLOAD, ORDER),
        task_story(ORDER, "o-1", PAYLOAD, {"charge": {"charge_id": "ch_1"}}),
        *(step_summary(s.name, s.agent, PAYLOAD, run=1, failure_count=0) for s in ORDER.steps),
    ]
    for text in texts:
        assert not any(private in text for private in PRIVATE), text
