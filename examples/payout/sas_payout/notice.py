"""The ``payout_notice`` task type: the notices of a payout run, one to each payee paid, sent
as one call (``POST /runs/{run_id}/notices``) and withdrawn as one (``DELETE
/notices/{notice_id}``). The payout (``sas_payout/workflows.py``) runs it as a child task: a task
of its own, with its own steps, Supervisor ladder and ``sas show``; undoing the payout withdraws
the notices through the child's clean-up.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import Forward, HttpCall, Input, Service, StepDefinition, TaskDefinition, task_workflow
    from sas_payout.models import NoticeInput, NoticesSent, NoticesWithdrawn

NOTICES = Service("payout_notices", lookup="/notices/lookup")

SEND = StepDefinition(
    "send",
    forward=HttpCall(
        NOTICES,
        "POST",
        "/runs/{run_id}/notices",
        params={"run_id": Input("run_id")},
        body={"channel": Input("channel")},
        result=NoticesSent,
        action="send",
    ),
    undo=HttpCall(
        NOTICES,
        "DELETE",
        "/notices/{notice_id}",
        params={"notice_id": Forward("notice_id")},
        result=NoticesWithdrawn,
        action="withdraw",
    ),
)

PAYOUT_NOTICE = TaskDefinition("payout_notice", NoticeInput, (SEND,), summary="notices of run {run_id} by {channel}")
PayoutNoticeWorkflow = task_workflow(PAYOUT_NOTICE)
