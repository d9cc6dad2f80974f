"""sas's public API: what a team imports to declare, test and drive its own task types.

It is split by who imports it, one module each; a name not in one of their ``__all__`` is sas's
own and may change in any release:

| Module | Imported by | What it holds |
| --- | --- | --- |
| `sas.api` (this one) | a task type's module | declaring a task type, calling services, the models, registration |
| [`sas.api.testing`][sas.api.testing] | a team's tests | fake Agents, a task run in the time-skipping environment, one Agent alone, the failure matrix |
| [`sas.api.contract`][sas.api.contract] | a service's own tests | checking a service against the HTTP contract (what ``sas check-service`` runs) |
| [`sas.api.client`][sas.api.client] | a team's own code (a service, a job) | the task client, what it answers, its errors |
| [`sas.api.agent_class`][sas.api.agent_class] | an Agent written the older way | a hand-written Agent as a class (deprecated, removed in 1.0) |

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
through it and loads the declarations alone. The other modules load what has no place there
(Temporal's test server and client, httpx, the state store); a team imports their names from
them (``from sas.api.testing import FakeAgents``). Each of their names is a name of this module
too, loaded when first asked for (``sas.api.FakeAgents`` is ``sas.api.testing.FakeAgents``), as
code written before the split imports them.

Groups (each name links to its entry in the docs site's API reference):

- Declaring a task type: [`TaskDefinition`][sas.api.TaskDefinition],
  [`StepDefinition`][sas.api.StepDefinition], [`Wait`][sas.api.Wait],
  [`Parallel`][sas.api.Parallel], [`Sequence`][sas.api.Sequence], [`ChildTask`][sas.api.ChildTask], [`ForEach`][sas.api.ForEach] (a
  fan-out over a list, with its [`Tolerance`][sas.api.Tolerance]), [`When`][sas.api.When],
  [`Choice`][sas.api.Choice] (one of several paths, each an [`Option`][sas.api.Option]),
  [`StepContext`][sas.api.StepContext], [`StepPolicyValues`][sas.api.StepPolicyValues], [`task_workflow`][sas.api.task_workflow].
- Calling services: [`Service`][sas.api.Service], [`HttpCall`][sas.api.HttpCall] and what goes
  in a body ([`Input`][sas.api.Input], [`Result`][sas.api.Result], [`Forward`][sas.api.Forward],
  [`Const`][sas.api.Const], [`TaskId`][sas.api.TaskId], [`ForwardKey`][sas.api.ForwardKey]);
  hand-written Agents, one function each, declared with
  [`Service.action`][sas.api.Service.action] and given an
  [`AgentContext`][sas.api.AgentContext].
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
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import pkgutil
from importlib.abc import InspectLoader
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
from sas.task_models.results import ProviderId, StepResultModel
from sas.task_models.task_input import TaskInput
from sas.task_models.text import UserText
from sas.task_types.agent_context import AgentContext
from sas.task_types.choices import Choice, Option
from sas.task_types.demos import DEMO_ENTRY_POINT_GROUP, DemoCase, DemoPlan
from sas.task_types.discovery import ENTRY_POINT_GROUP, TaskTypeError
from sas.task_types.fan_out import ForEach, Tolerance
from sas.task_types.groups import Parallel, Sequence
from sas.task_types.services import HttpCall, Service
from sas.task_types.sources import Const, Forward, ForwardKey, Input, Result, TaskId
from sas.task_types.steps import ChildTask, StepContext, StepDefinition, Wait, When
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.task_workflow import task_workflow

if TYPE_CHECKING:
    # The other public modules, for the type checker: their names are this module's too.
    from sas.api.agent_class import *  # noqa: F403
    from sas.api.client import *  # noqa: F403
    from sas.api.contract import *  # noqa: F403
    from sas.api.testing import *  # noqa: F403

__all__ = [
    "DEMO_ENTRY_POINT_GROUP",
    "ENTRY_POINT_GROUP",
    "AgentContext",
    "Approval",
    "ChildTask",
    "Choice",
    "Const",
    "DemoCase",
    "DemoPlan",
    "ForEach",
    "Forward",
    "ForwardKey",
    "HttpCall",
    "Input",
    "Option",
    "Parallel",
    "ProviderId",
    "Result",
    "Secret",
    "Sequence",
    "Service",
    "StepCall",
    "StepContext",
    "StepDefinition",
    "StepPolicyValues",
    "StepResult",
    "StepResultModel",
    "StepState",
    "StepStatus",
    "TaskDefinition",
    "TaskId",
    "TaskInput",
    "TaskResult",
    "TaskState",
    "TaskStatus",
    "TaskTypeError",
    "Tolerance",
    "UserText",
    "Wait",
    "When",
    "task_workflow",
]


@functools.cache
def _audiences() -> dict[str, str]:
    """Each name of the other public modules (every module of ``sas.api`` whose name has no
    leading underscore), by the module that holds it. Read from each module's ``__all__``
    without running the module: running it is what loads what a workflow's sandbox must not."""
    found: dict[str, str] = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):  # noqa: F405 - the package's own
        if module.name.rpartition(".")[2].startswith("_"):
            continue
        spec = importlib.util.find_spec(module.name)
        loader = spec.loader if spec is not None else None
        source = loader.get_source(module.name) if isinstance(loader, InspectLoader) else None
        if source is None:  # pragma: no cover - sas is installed with its sources
            raise ImportError(f"{module.name}: no source to read its __all__ from")
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                found |= dict.fromkeys(ast.literal_eval(node.value), module.name)
    return found


if not TYPE_CHECKING:  # the type checker sees these names through the imports above

    def __getattr__(name: str) -> Any:
        module = None if name.startswith("__") else _audiences().get(name)
        if module is None:
            raise AttributeError(f"module 'sas.api' has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)
