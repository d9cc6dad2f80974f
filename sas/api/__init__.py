"""sas's public API: everything a team needs to declare, run and test its own task types.

Names not listed in ``__all__`` here are sas's own and may change in any release.

A task type is a module in the team's package:

```python
from sas.api import HttpCall, Input, Forward, Service, StepDefinition, StepResultModel
from sas.api import TaskDefinition, TaskInput, task_workflow

class GreetInput(TaskInput):
    name: str

class Greeted(StepResultModel):
    greeting_id: str

GREETER = Service("greeter")
GREET = StepDefinition(
    "greet",
    forward=GREETER.post("/greeter/greet", body={"name": Input("name")}, result=Greeted),
    undo=GREETER.post("/greeter/ungreet", body={"greeting_id": Forward("greeting_id")}, result=Greeted),
)
GreetingWorkflow = task_workflow(TaskDefinition("greeting", GreetInput, (GREET,)))
```

named in the package's ``pyproject.toml``, and nothing of sas is edited:

```toml
[project.entry-points."sas.task_types"]
greeting = "my_team.greeting"
```

The worker, the Supervisor, ``sas submit --type greeting``, ``sas types``, Schedules, the bulk
actions, the UI summaries and the metrics then know it; ``SAS_SERVICES__GREETER__URL`` says
where the service is. The HTTP contract a service meets is in ``docs/http-contract.md``.

The module is imported inside Temporal's workflow sandbox for each run: this module is passed
through it, and the Agents' and tests' names below (``Agent``, ``FakeAgents``, ...) are loaded
only when asked for, so that a task type's module stays light.

Groups (each name links to its entry in the docs site's API reference):

- Declaring a task type: [`TaskDefinition`][sas.api.TaskDefinition],
  [`StepDefinition`][sas.api.StepDefinition], [`Wait`][sas.api.Wait],
  [`Parallel`][sas.api.Parallel], [`Sequence`][sas.api.Sequence], [`ChildTask`][sas.api.ChildTask], [`ForEach`][sas.api.ForEach] (a
  fan-out over a list, with its [`Tolerance`][sas.api.Tolerance]), [`When`][sas.api.When],
  [`StepContext`][sas.api.StepContext], [`StepPolicyValues`][sas.api.StepPolicyValues], [`task_workflow`][sas.api.task_workflow].
- Calling services: [`Service`][sas.api.Service], [`HttpCall`][sas.api.HttpCall] and what goes
  in a body ([`Input`][sas.api.Input], [`Result`][sas.api.Result], [`Forward`][sas.api.Forward],
  [`Const`][sas.api.Const], [`TaskId`][sas.api.TaskId], [`ForwardKey`][sas.api.ForwardKey]);
  hand-written Agents, one function each, declared with
  [`Service.action`][sas.api.Service.action] and given an
  [`AgentContext`][sas.api.AgentContext], with [`parse_payload`][sas.api.parse_payload]; the
  older form, a class (deprecated, removed in 1.0): [`Agent`][sas.api.Agent], [`implements`][sas.api.implements],
  [`attempt_deadline`][sas.api.attempt_deadline], [`save_checkpoint`][sas.api.save_checkpoint],
  [`last_checkpoint`][sas.api.last_checkpoint].
- Models: [`TaskInput`][sas.api.TaskInput], [`StepResultModel`][sas.api.StepResultModel],
  [`Secret`][sas.api.Secret], [`ProviderId`][sas.api.ProviderId], [`UserText`][sas.api.UserText],
  [`StepCall`][sas.api.StepCall], [`StepResult`][sas.api.StepResult],
  [`TaskResult`][sas.api.TaskResult], [`TaskStatus`][sas.api.TaskStatus],
  [`StepStatus`][sas.api.StepStatus], [`TaskState`][sas.api.TaskState],
  [`StepState`][sas.api.StepState], [`Approval`][sas.api.Approval].
- Registration: [`ENTRY_POINT_GROUP`][sas.api.ENTRY_POINT_GROUP],
  [`TaskTypeError`][sas.api.TaskTypeError]; a demo for ``sas demo``, named in the
  [`DEMO_ENTRY_POINT_GROUP`][sas.api.DEMO_ENTRY_POINT_GROUP]: [`DemoPlan`][sas.api.DemoPlan]
  of [`DemoCase`][sas.api.DemoCase]s.
- Starting tasks and acting on them from a team's own code (what the ``sas`` command line
  does, typed): [`TaskClient`][sas.api.TaskClient], its results [`Submitted`][sas.api.Submitted],
  [`TaskView`][sas.api.TaskView], [`Outcome`][sas.api.Outcome],
  [`ActionResult`][sas.api.ActionResult], bulk actions over a [`Selection`][sas.api.Selection]
  ([`BulkResult`][sas.api.BulkResult]), incidents ([`IncidentView`][sas.api.IncidentView]),
  and its reads: a task's story ([`TaskStory`][sas.api.TaskStory]), the tasks
  ([`TaskList`][sas.api.TaskList] of [`ListedTask`][sas.api.ListedTask]), the alerts
  ([`AlertList`][sas.api.AlertList] of [`AlertView`][sas.api.AlertView],
  [`AlertChange`][sas.api.AlertChange]), the services' breakers
  ([`ServiceView`][sas.api.ServiceView], [`BreakerChange`][sas.api.BreakerChange]),
  and its errors, each a
  [`ClientError`][sas.api.ClientError]: [`InvalidInput`][sas.api.InvalidInput],
  [`TaskNotFound`][sas.api.TaskNotFound], [`TaskIdTaken`][sas.api.TaskIdTaken],
  [`NotApplicable`][sas.api.NotApplicable], [`NotConfirmed`][sas.api.NotConfirmed],
  [`Unreachable`][sas.api.Unreachable].
- Testing: [`FakeAgents`][sas.api.FakeAgents], [`fake_worker`][sas.api.fake_worker],
  [`run_task`][sas.api.run_task], one Agent alone against a service: [`run_agent`][sas.api.run_agent], [`time_skipping_environment`][sas.api.time_skipping_environment],
  and the failure matrix, every failure point of a type checked against the promise:
  [`check_failure_matrix`][sas.api.check_failure_matrix],
  [`failure_matrix`][sas.api.failure_matrix], [`MatrixCase`][sas.api.MatrixCase].
- Checking a service against the HTTP contract (what ``sas check-service`` runs):
  [`check_service`][sas.api.check_service], [`assert_conforms`][sas.api.assert_conforms],
  [`ServiceReport`][sas.api.ServiceReport], [`ClauseResult`][sas.api.ClauseResult],
  [`Verdict`][sas.api.Verdict], [`ExplicitCalls`][sas.api.ExplicitCalls],
  [`SlowCall`][sas.api.SlowCall], [`builtin_services_slowdown`][sas.api.builtin_services_slowdown],
  [`ServiceCheckError`][sas.api.ServiceCheckError].
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sas.task_models import (
    Approval,
    Secret,
    StepCall,
    StepPolicyValues,
    StepResult,
    StepState,
    StepStatus,
    TaskResult,
    TaskState,
    TaskStatus,
)
from sas.task_models.activity_defs import implements
from sas.task_models.results import ProviderId, StepResultModel
from sas.task_models.task_input import TaskInput
from sas.task_models.text import UserText
from sas.task_types.agent_context import AgentContext
from sas.task_types.discovery import ENTRY_POINT_GROUP, TaskTypeError
from sas.task_types.fan_out import ForEach, Tolerance
from sas.task_types.groups import Parallel, Sequence
from sas.task_types.services import HttpCall, Service
from sas.task_types.sources import Const, Forward, ForwardKey, Input, Result, TaskId
from sas.task_types.steps import ChildTask, StepContext, StepDefinition, Wait, When
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.task_workflow import task_workflow

if TYPE_CHECKING:
    from sas.activities.agent import Agent, attempt_deadline, parse_payload
    from sas.activities.heartbeats import last_checkpoint, save_checkpoint
    from sas.api._agent_testing import run_agent
    from sas.api._failure_matrix import MatrixCase, check_failure_matrix, failure_matrix
    from sas.api._testing import FakeAgents, fake_worker, run_task, time_skipping_environment
    from sas.client.alerts import AlertChange, AlertList, AlertView
    from sas.client.breakers import BreakerChange, ServiceView
    from sas.client.errors import (
        ClientError,
        InvalidInput,
        NotApplicable,
        NotConfirmed,
        TaskIdTaken,
        TaskNotFound,
        Unreachable,
    )
    from sas.client.incidents import IncidentView
    from sas.client.listing import ListedTask, TaskList
    from sas.client.results import ActionResult, BulkResult, Submitted
    from sas.client.selection import Selection
    from sas.client.status import TaskView
    from sas.client.story import TaskStory
    from sas.client.task_client import TaskClient
    from sas.client.waiting import Outcome
    from sas.conformance import (
        ClauseResult,
        ExplicitCalls,
        ServiceCheckError,
        ServiceReport,
        SlowCall,
        Verdict,
        assert_conforms,
        builtin_services_slowdown,
        check_service,
    )
    from sas.task_types.demos import DEMO_ENTRY_POINT_GROUP, DemoCase, DemoPlan

__all__ = [
    "DEMO_ENTRY_POINT_GROUP",
    "ENTRY_POINT_GROUP",
    "ActionResult",
    "Agent",
    "AgentContext",
    "AlertChange",
    "AlertList",
    "AlertView",
    "Approval",
    "BreakerChange",
    "BulkResult",
    "ChildTask",
    "ClauseResult",
    "ClientError",
    "Const",
    "DemoCase",
    "DemoPlan",
    "ExplicitCalls",
    "FakeAgents",
    "ForEach",
    "Forward",
    "ForwardKey",
    "HttpCall",
    "IncidentView",
    "Input",
    "InvalidInput",
    "ListedTask",
    "MatrixCase",
    "NotApplicable",
    "NotConfirmed",
    "Outcome",
    "Parallel",
    "ProviderId",
    "Result",
    "Secret",
    "Selection",
    "Sequence",
    "Service",
    "ServiceCheckError",
    "ServiceReport",
    "ServiceView",
    "SlowCall",
    "StepCall",
    "StepContext",
    "StepDefinition",
    "StepPolicyValues",
    "StepResult",
    "StepResultModel",
    "StepState",
    "StepStatus",
    "Submitted",
    "TaskClient",
    "TaskDefinition",
    "TaskId",
    "TaskIdTaken",
    "TaskInput",
    "TaskList",
    "TaskNotFound",
    "TaskResult",
    "TaskState",
    "TaskStatus",
    "TaskStory",
    "TaskTypeError",
    "TaskView",
    "Tolerance",
    "Unreachable",
    "UserText",
    "Verdict",
    "Wait",
    "When",
    "assert_conforms",
    "attempt_deadline",
    "builtin_services_slowdown",
    "check_failure_matrix",
    "check_service",
    "failure_matrix",
    "fake_worker",
    "implements",
    "last_checkpoint",
    "parse_payload",
    "run_agent",
    "run_task",
    "save_checkpoint",
    "task_workflow",
    "time_skipping_environment",
]

# Loaded when first asked for: the Agents' code (httpx, the state store) and the test helpers
# (Temporal's test server) have no place in a workflow's sandbox.
_LAZY = {
    "Agent": "sas.activities.agent",
    "attempt_deadline": "sas.activities.agent",
    "parse_payload": "sas.activities.agent",
    "last_checkpoint": "sas.activities.heartbeats",
    "save_checkpoint": "sas.activities.heartbeats",
    "FakeAgents": "sas.api._testing",
    "MatrixCase": "sas.api._failure_matrix",
    "check_failure_matrix": "sas.api._failure_matrix",
    "failure_matrix": "sas.api._failure_matrix",
    "fake_worker": "sas.api._testing",
    "run_agent": "sas.api._agent_testing",
    "run_task": "sas.api._testing",
    "time_skipping_environment": "sas.api._testing",
    # The task client: Temporal's client and the state store, for a team's service code.
    "TaskClient": "sas.client.task_client",
    "Submitted": "sas.client.results",
    "ActionResult": "sas.client.results",
    "BulkResult": "sas.client.results",
    "Selection": "sas.client.selection",
    "IncidentView": "sas.client.incidents",
    "TaskStory": "sas.client.story",
    "TaskList": "sas.client.listing",
    "ListedTask": "sas.client.listing",
    "AlertList": "sas.client.alerts",
    "AlertView": "sas.client.alerts",
    "AlertChange": "sas.client.alerts",
    "ServiceView": "sas.client.breakers",
    "BreakerChange": "sas.client.breakers",
    "TaskView": "sas.client.status",
    "Outcome": "sas.client.waiting",
    "ClientError": "sas.client.errors",
    "InvalidInput": "sas.client.errors",
    "NotApplicable": "sas.client.errors",
    "NotConfirmed": "sas.client.errors",
    "TaskIdTaken": "sas.client.errors",
    "TaskNotFound": "sas.client.errors",
    "Unreachable": "sas.client.errors",
    "ClauseResult": "sas.conformance",
    "ExplicitCalls": "sas.conformance",
    "ServiceCheckError": "sas.conformance",
    "ServiceReport": "sas.conformance",
    "SlowCall": "sas.conformance",
    "Verdict": "sas.conformance",
    "assert_conforms": "sas.conformance",
    "builtin_services_slowdown": "sas.conformance",
    "check_service": "sas.conformance",
    # A demo's plan: read by `sas demo`, never by a workflow.
    "DEMO_ENTRY_POINT_GROUP": "sas.task_types.demos",
    "DemoCase": "sas.task_types.demos",
    "DemoPlan": "sas.task_types.demos",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sas.api' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
