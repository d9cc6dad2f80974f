"""A task workflow takes exactly one argument, its input. Started with none or with two (plain
``temporal workflow start`` makes either easy), the SDK would call its run method with the
wrong count, and the ``TypeError`` would fail every workflow task for ever: the task Stuck,
never failed. This interceptor fails such a run at once, non-retryably, with one line."""

from __future__ import annotations

from typing import Any

from temporalio import worker
from temporalio.exceptions import ApplicationError

from sas.workflows.inputs import INVALID_INPUT


class OneArgument(worker.Interceptor):
    """Worker interceptor: every sas workflow (a class built on ``OperatorHandlers``) gets
    exactly one argument. The workflow class is recognised by a marker, not ``issubclass``:
    inside the sandbox it is a copy of the class this module would import."""

    def workflow_interceptor_class(
        self, input: worker.WorkflowInterceptorClassInput
    ) -> type[worker.WorkflowInboundInterceptor] | None:
        return _Inbound


class _Inbound(worker.WorkflowInboundInterceptor):
    async def execute_workflow(self, input: worker.ExecuteWorkflowInput) -> Any:
        if getattr(input.type, "sas_task_workflow", False) and len(input.args) != 1:
            raise ApplicationError(
                f"invalid input: {input.type.__name__} takes exactly one argument, its input as one JSON "
                f"object; it was started with {len(input.args)}",
                type=INVALID_INPUT,
                non_retryable=True,
            )
        return await super().execute_workflow(input)
