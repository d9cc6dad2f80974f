"""The current details of a sas workflow, told when Temporal's metadata query asks for them.

The Temporal UI (and ``temporal workflow describe``) reads a workflow's current details through
the built-in ``__temporal_workflow_metadata`` query, and only there. So instead of setting them
at every change of the task (formatting its story and steps each time, to be read perhaps never),
this interceptor fills them into that query's answer from the workflow's ``current_details_now``
(``OperatorHandlers``: the Publisher's ``details``). A query runs read-only, between activations:
what it tells is the task as it stands, and it adds no command or event.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.worker import (
    HandleQueryInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

METADATA_QUERY = "__temporal_workflow_metadata"


class LiveDetails(Interceptor):
    """Worker interceptor: the metadata query of a sas workflow answers with its current details."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _Inbound


class _Inbound(WorkflowInboundInterceptor):
    async def handle_query(self, input: HandleQueryInput) -> Any:
        answer = await super().handle_query(input)
        if input.query == METADATA_QUERY and isinstance(answer, WorkflowMetadata):
            told = getattr(workflow.instance(), "current_details_now", None)
            details = told() if callable(told) else None
            if details:
                answer.current_details = details
        return answer
