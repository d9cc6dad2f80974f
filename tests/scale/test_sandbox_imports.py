"""What the workflow sandbox loads: the workflow modules pull in neither the database stack
nor the HTTP client, every workflow validates in a sandbox that refuses them, the runner
the workers use passes through exactly the data models (so the workflow modules are
re-imported, and guarded, in every run), and workflows still run under it."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import (
    RestrictedWorkflowAccessError,
    SandboxedWorkflowRunner,
    SandboxMatcher,
    SandboxRestrictions,
)
from temporalio.worker.workflow_sandbox._importer import Importer
from temporalio.worker.workflow_sandbox._restrictions import RestrictionContext

from sas.supervisor.run.workflow import SupervisorWorkflow
from sas.task_models import TaskState
from sas.task_types.task_definition import TaskDefinition
from sas.workflows import ALL_WORKFLOWS
from sas.workflows.runner import workflow_runner
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "httpx", "httpcore", "aiosqlite", "asyncpg", "alembic", "starlette", "cryptography")


def test_workflow_modules_import_nothing_heavy() -> None:
    """In a fresh interpreter: what importing the workflows, the Supervisor's among them (what the
    sandbox loads, and what its passthrough imports load in the host), adds to sys.modules."""
    code = (
        "import sys, json; before = set(sys.modules); import sas.workflows, sas.supervisor.run.workflow; "
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not loaded & set(HEAVY), f"the workflow modules import {sorted(loaded & set(HEAVY))}"


def refusing_heavy_modules() -> SandboxedWorkflowRunner:
    """The workers' sandbox, told to refuse the heavy modules as well."""
    restrictions = workflow_runner().restrictions
    return SandboxedWorkflowRunner(
        restrictions=dataclasses.replace(
            restrictions, invalid_modules=restrictions.invalid_modules | SandboxMatcher(access=set(HEAVY))
        )
    )


WORKFLOW_CLASSES = [*ALL_WORKFLOWS, SupervisorWorkflow]


@pytest.mark.parametrize("cls", WORKFLOW_CLASSES, ids=lambda c: c.__name__)
async def test_workflows_validate_in_a_sandbox_that_refuses_heavy_modules(cls: type) -> None:
    # (async: the instance is created on a running loop) Raises RestrictedWorkflowAccessError
    # if the module, imported inside the sandbox, touches one.
    refusing_heavy_modules().prepare_workflow(workflow._Definition.must_from_class(cls))


async def test_the_refusing_sandbox_does_refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a workflow module that imports httpx does not validate."""
    module = f"heavy_probe_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import httpx  # noqa: F401\n"
        "from temporalio import workflow\n\n\n"
        "@workflow.defn\n"
        "class HeavyWorkflow:\n"
        "    @workflow.run\n"
        "    async def run(self) -> None:\n"
        "        return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    heavy = importlib.import_module(module).HeavyWorkflow
    with pytest.raises(RestrictedWorkflowAccessError, match="httpx"):
        refusing_heavy_modules().prepare_workflow(workflow._Definition.must_from_class(heavy))
    monkeypatch.delitem(sys.modules, module)


def test_the_runner_passes_through_exactly_the_data_models() -> None:
    restrictions = workflow_runner().restrictions
    added = restrictions.passthrough_modules - SandboxRestrictions.default.passthrough_modules
    # The data models; the declarations a task type is made of (sas.task_types: steps, services,
    # calls declared as data) and the public API a team's module imports them from (sas.api).
    assert added == {"sas.task_models", "sas.task_types", "sas.api", "sas.supervisor.models"}
    # The sandbox defaults it builds on still hold, pydantic among them.
    assert restrictions.passthrough_modules >= SandboxRestrictions.default.passthrough_modules
    assert {"pydantic", "pydantic_core", "annotated_types"} <= SandboxRestrictions.default.passthrough_modules
    assert not restrictions.passthrough_all_modules
    assert restrictions.invalid_modules == SandboxRestrictions.default.invalid_modules
    assert restrictions.invalid_module_members == SandboxRestrictions.default.invalid_module_members

    importer = Importer(restrictions, RestrictionContext())
    # Neither a workflow module nor its package is shared with the host.
    for cls in WORKFLOW_CLASSES:
        for name in (cls.__module__, cls.__module__.rpartition(".")[0]):
            assert not importer.module_configured_passthrough(name), f"{name} is passed through"
    for name in (
        "sas.supervisor.activity_defs",
        "sas.supervisor.detect.scan",
        "sas.supervisor.act.apply",
        "sas.supervisor.detect.orphans",
    ):
        assert not importer.module_configured_passthrough(name), f"{name} is passed through"
    assert importer.module_configured_passthrough("sas.task_models.results")


class RecordingRunner(SandboxedWorkflowRunner):
    """The workers' runner, keeping the instances it makes so a test can look inside."""

    made: list[WorkflowInstance]

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        instance = super().create_instance(det)
        self.made.append(instance)
        return instance


@pytest.mark.parametrize("cls", WORKFLOW_CLASSES, ids=lambda c: c.__name__)
async def test_each_run_gets_its_own_copy_of_the_workflow_module(cls: type) -> None:
    """Re-imported per run: the module in the sandbox is not the host's, and two runs do not
    share one. A task type's class is the one ``task_workflow`` made before for an equal
    definition (it holds no state of a run); any other workflow class is a copy per run. The
    models it uses are the host's (passed through)."""
    runner = RecordingRunner(restrictions=workflow_runner().restrictions)
    object.__setattr__(runner, "made", [])
    definition = workflow._Definition.must_from_class(cls)
    runner.prepare_workflow(definition)
    runner.prepare_workflow(definition)
    modules = [instance.importer.new_modules[cls.__module__] for instance in runner.made]  # type: ignore[attr-defined]
    assert modules[0] is not sys.modules[cls.__module__] and modules[1] is not sys.modules[cls.__module__]
    assert modules[0] is not modules[1]
    first, second = (instance.globals_and_locals["__temporal_workflow_class"] for instance in runner.made)  # type: ignore[attr-defined]
    assert first.__qualname__ == cls.__qualname__
    host_definition = getattr(cls, "definition", None)
    if isinstance(host_definition, TaskDefinition):
        # Made once per process for an equal definition (workflows/task_workflow.py). A definition
        # holding objects of the re-imported module itself (the trip's Agent declarations) is not
        # equal to the host's: its run gets a class of its own, bound to that run's objects.
        assert (first is cls) == (first.definition == host_definition)
        assert (second is first) == (first is cls)
        if cls.__module__ == "sas_orders.workflows":  # declared from passed-through modules
            assert first is cls and second is cls
    else:
        assert first is not cls and second is not cls and first is not second
    if cls.__module__.startswith("sas.workflows"):
        from sas import task_models

        # A name the module took from task_models inside the sandbox is the host's object.
        shared = {n for n, v in vars(task_models).items() if isinstance(v, type) and n[0].isupper()}
        used = {n for n in shared if n in first.run.__globals__}
        assert used, f"{cls.__name__}'s module uses no task_models class"
        assert all(first.run.__globals__[n] is getattr(task_models, n) for n in used)


async def test_workflows_run_under_the_narrowed_sandbox(stack: Stack, client: Client) -> None:
    """The worker (OrderWorkflow) and the Supervisor (SupervisorWorkflow) run with workflow_runner()
    (tests/stack.py): an order completes, and neither workflow's task ever failed."""
    task_id = fresh_id("sandbox")
    result = await (await stack.submit(task_id)).result()
    assert result.state == TaskState.PROCESSED

    supervisor = client.get_workflow_handle(stack.settings.supervisor.workflow_id)

    async def supervisor_events() -> list[EventType.ValueType]:
        return [event.event_type async for event in supervisor.fetch_history_events()]

    # One of the Supervisor's sweeps ran its activities to the end.
    events = await wait_until(
        supervisor_events, lambda e: EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in e, timeout=30, what="a sweep"
    )
    order_events = [event.event_type async for event in client.get_workflow_handle(task_id).fetch_history_events()]
    for history in (events, order_events):
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in history
