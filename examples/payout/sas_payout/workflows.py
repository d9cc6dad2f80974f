"""The payout task type: ``validate → pay (for each recipient) → notice (child task)``. The
module its entry point names.

Every call is declared as data, REST-style, with the ids in their paths: the run is validated
with ``PUT /runs/{run_id}`` (the task's id), each recipient is paid with ``POST
/payees/{payee_id}/payments`` and a payment is reversed with ``DELETE /payments/{payment_id}``,
the bank's own id, from the payment's result (or the bank's lookup when its answer was lost).
The notices are a task type of their own (``sas_payout/notice.py``), run as a child task, so
that they have their own steps, ladder and ``sas show``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        ChildTask,
        ForEach,
        Forward,
        HttpCall,
        Input,
        Service,
        StepContext,
        StepDefinition,
        StepPolicyValues,
        TaskDefinition,
        TaskId,
        Tolerance,
        task_workflow,
    )
    from sas_payout.models import Paid, PayoutInput, Reversed, RunClosed, RunValidated
    from sas_payout.story import payout_line, payout_story

# Each service's lookup is where its REST paths are (GET /payments/lookup?idempotency_key=...).
RUNS = Service("payout_runs", lookup="/runs/lookup")
BANK = Service("payout_bank", lookup="/payments/lookup")

VALIDATE = StepDefinition(
    "validate",
    forward=HttpCall(
        RUNS,
        "PUT",
        "/runs/{run_id}",
        params={"run_id": TaskId()},
        body={"currency": Input("currency"), "recipients": Input("recipients")},
        result=RunValidated,
        action="validate",
    ),
    undo=HttpCall(
        RUNS, "DELETE", "/runs/{run_id}", params={"run_id": Forward("run_id")}, result=RunClosed, action="close"
    ),
)


def recipients(ctx: StepContext) -> Sequence[Mapping[str, Any]]:
    """Each recipient with the payout's currency: an item's call reads only its item."""
    currency = ctx.input["currency"]
    return [{**recipient, "currency": currency} for recipient in ctx.input["recipients"]]


PAY = ForEach(
    "pay",
    items=recipients,
    key=lambda recipient: str(recipient["payee_id"]),
    forward=HttpCall(
        BANK,
        "POST",
        "/payees/{payee_id}/payments",
        params={"payee_id": Input("payee_id")},
        body={"run_id": TaskId(), "amount_cents": Input("amount_cents"), "currency": Input("currency")},
        result=Paid,
        action="pay",
    ),
    undo=HttpCall(
        BANK,
        "DELETE",
        "/payments/{payment_id}",
        params={"payment_id": Forward("payment_id")},
        result=Reversed,
        action="reverse",
    ),
    # A refusal (a blocked payee) is for good at once; a bank that stumbles is retried twice.
    policy=StepPolicyValues(complete_by_s=10, max_attempts=3, initial_interval_s=0.5, max_interval_s=2),
    max_concurrency=10,
    batch_size=50,
    # A few payees may be refused (their accounts closed, blocked): the rest are still paid. More
    # than that and the run is wrong: every payment is reversed.
    tolerate=Tolerance(count=2, percent=10),
)


def the_notices(ctx: StepContext) -> Mapping[str, Any]:
    """The child's input: the run the bank validated, and how its payees hear of it."""
    return {"run_id": ctx.results["validate"]["run_id"], "channel": ctx.input["channel"]}


NOTICE = ChildTask("notice", task_type="payout_notice", input=the_notices)

PAYOUT = TaskDefinition("payout", PayoutInput, (VALIDATE, PAY, NOTICE), summary=payout_line, details=payout_story)
PayoutWorkflow = task_workflow(PAYOUT)
