"""Testing a team's task types, fast: its workflows in Temporal's time-skipping environment, with
fake Agents registered under the real activity names and a fake state store. A wait of days
passes in a second; no service, database or server is needed (the ``testing`` extra brings the
time-skipping server).

```python
from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
```

- A task run with fake Agents: [`FakeAgents`][sas.api.testing.FakeAgents],
  [`run_task`][sas.api.testing.run_task], [`fake_worker`][sas.api.testing.fake_worker],
  [`time_skipping_environment`][sas.api.testing.time_skipping_environment]; one item of a
  fan-out refused, failing or slowed (``FakeAgents.refuse_items``, ``fail_items``, ``slow_items``).
- One Agent alone against a service at a URL: [`run_agent`][sas.api.testing.run_agent].
- The failure matrix, every failure point of a type checked against the promise:
  [`check_failure_matrix`][sas.api.testing.check_failure_matrix],
  [`failure_matrix`][sas.api.testing.failure_matrix], [`MatrixCase`][sas.api.testing.MatrixCase].

What these cannot show - the HTTP contract, the mirror, the Supervisor, a crash - is for
[`sas.api.contract`][sas.api.contract] and for tests on a real stack (``sas up``).
"""

from __future__ import annotations

from sas.api.testing._agent_alone import run_agent
from sas.api.testing._failure_matrix import MatrixCase, check_failure_matrix, failure_matrix
from sas.api.testing._fakes import FakeAgents
from sas.api.testing._running import fake_worker, run_task, time_skipping_environment

__all__ = [
    "FakeAgents",
    "MatrixCase",
    "check_failure_matrix",
    "failure_matrix",
    "fake_worker",
    "run_agent",
    "run_task",
    "time_skipping_environment",
]
