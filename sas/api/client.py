"""Starting tasks and acting on them from a team's own code (a service, a job): what the ``sas``
command line does, typed, through one client.

```python
from sas.api.client import TaskClient, TaskIdTaken
```

- The client and what its actions answer: [`TaskClient`][sas.api.client.TaskClient],
  [`Submitted`][sas.api.client.Submitted], [`TaskView`][sas.api.client.TaskView],
  [`Outcome`][sas.api.client.Outcome], [`ActionResult`][sas.api.client.ActionResult], bulk
  actions over a [`Selection`][sas.api.client.Selection]
  ([`BulkResult`][sas.api.client.BulkResult]), incidents
  ([`IncidentView`][sas.api.client.IncidentView]).
- Its reads: a task's story ([`TaskStory`][sas.api.client.TaskStory]), the tasks
  ([`TaskList`][sas.api.client.TaskList] of [`ListedTask`][sas.api.client.ListedTask]), the
  alerts ([`AlertList`][sas.api.client.AlertList] of [`AlertView`][sas.api.client.AlertView],
  [`AlertChange`][sas.api.client.AlertChange]), the services' breakers
  ([`ServiceView`][sas.api.client.ServiceView], [`BreakerChange`][sas.api.client.BreakerChange]).
- Its lifetime: ``async with await TaskClient.connect() as client:`` closes it
  ([`close`][sas.client.core.ClientCore.close]); a program that used it ends through
  [`run_driver`][sas.api.client.run_driver], so that it exits with its own code, never the
  abort of temporalio's Rust bridge at interpreter exit.
- Its errors, each a [`ClientError`][sas.api.client.ClientError]:
  [`InvalidInput`][sas.api.client.InvalidInput], [`TaskNotFound`][sas.api.client.TaskNotFound],
  [`TaskIdTaken`][sas.api.client.TaskIdTaken], [`NotApplicable`][sas.api.client.NotApplicable],
  [`NotConfirmed`][sas.api.client.NotConfirmed], [`Unreachable`][sas.api.client.Unreachable],
  and, for a client that acts for one team, [`OutsideTeam`][sas.api.client.OutsideTeam].
"""

from __future__ import annotations

from sas.client.alerts import AlertChange, AlertList, AlertView
from sas.client.breakers import BreakerChange, ServiceView
from sas.client.core import run_driver
from sas.client.errors import (
    ClientError,
    InvalidInput,
    NotApplicable,
    NotConfirmed,
    OutsideTeam,
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

__all__ = [
    "ActionResult",
    "AlertChange",
    "AlertList",
    "AlertView",
    "BreakerChange",
    "BulkResult",
    "ClientError",
    "IncidentView",
    "InvalidInput",
    "ListedTask",
    "NotApplicable",
    "NotConfirmed",
    "Outcome",
    "OutsideTeam",
    "Selection",
    "ServiceView",
    "Submitted",
    "TaskClient",
    "TaskIdTaken",
    "TaskList",
    "TaskNotFound",
    "TaskStory",
    "TaskView",
    "Unreachable",
    "run_driver",
]
