"""A new task type is one module plus one registration line (workflows/registry.py): the
worker's workflow list and the summaries pick it up, and it runs end to end."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sas import workflows
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from sas.workflows.summaries import task_summary
from tests.helpers import fresh_id
from tests.stack import Stack, order

EXPRESS = textwrap.dedent(
    """
    from temporalio import workflow
    from temporalio.common import RawValue

    with workflow.unsafe.imports_passed_through():
        from sas.task_models import OrderInput, TaskResult
        from sas.workflows.definitions import CHARGE, RESERVE, TaskDefinition
        from sas.workflows.scheduler import TaskScheduler

    EXPRESS = TaskDefinition("express", OrderInput, (CHARGE, RESERVE))


    @workflow.defn(name="ExpressWorkflow")
    class ExpressWorkflow(TaskScheduler):
        definition = EXPRESS

        @workflow.run
        async def run(self, order: RawValue) -> TaskResult:
            return await self.execute(order)
    """
)


@pytest.fixture
def express_registered(tmp_path: Path) -> Iterator[None]:
    module = f"sas_express_{fresh_id('t').replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(EXPRESS)
    sys.path.insert(0, str(tmp_path))
    registry.TASK_TYPE_MODULES["express"] = module  # the one line a new task type adds
    registry.task_types.cache_clear()
    try:
        yield
    finally:
        del registry.TASK_TYPE_MODULES["express"]
        registry.task_types.cache_clear()
        sys.path.remove(str(tmp_path))


async def test_a_new_task_type_is_a_module_and_a_line(express_registered: None, stack: Stack) -> None:
    express = registry.task_types()["express"]
    assert express.workflow_name == "ExpressWorkflow"
    assert express.workflow in workflows.ALL_WORKFLOWS
    assert registry.by_workflow_name("ExpressWorkflow") is express
    assert task_summary(express.definition, "x-1", order().model_dump()).endswith("charge → reserve")

    # The stack's worker was built after the registration: it runs the new workflow too.
    task_id = fresh_id("express")
    result: TaskResult = await (await stack.submit(task_id, order(), workflow="ExpressWorkflow")).result()
    assert result.state == TaskState.PROCESSED
    assert [e["action"] for e in await stack.ledger(task_id)] == ["charge", "reserve"]
    record = await stack.record(task_id)
    assert record is not None and record.task.task_type == "express"


def test_a_module_without_one_task_workflow_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sas_not_a_task_type.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    registry.TASK_TYPE_MODULES["broken"] = "sas_not_a_task_type"
    registry.task_types.cache_clear()
    try:
        with pytest.raises(TypeError, match="exactly one TaskScheduler workflow"):
            registry.task_types()
    finally:
        del registry.TASK_TYPE_MODULES["broken"]
        registry.task_types.cache_clear()
        sys.path.remove(str(tmp_path))
