"""Checking a running service against the HTTP contract (``docs/http-contract.md``), clause by
clause, from a test: the checks ``sas check-service`` runs.

```python
from sas.api.contract import assert_conforms, check_service
```

- The check and its report: [`check_service`][sas.api.contract.check_service],
  [`assert_conforms`][sas.api.contract.assert_conforms],
  [`ServiceReport`][sas.api.contract.ServiceReport],
  [`ClauseResult`][sas.api.contract.ClauseResult], [`Verdict`][sas.api.contract.Verdict].
- A service's calls said outright, for one whose Agents are hand-written:
  [`ExplicitCalls`][sas.api.contract.ExplicitCalls].
- Holding one forward call at the service, for the in-flight clause: a hook (the service's
  fault injection) is asked for a [`SlowCall`][sas.api.contract.SlowCall];
  [`builtin_services_slowdown`][sas.api.contract.builtin_services_slowdown] is the demo
  services' hook.
- A check that cannot start: [`ServiceCheckError`][sas.api.contract.ServiceCheckError].
"""

from __future__ import annotations

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

__all__ = [
    "ClauseResult",
    "ExplicitCalls",
    "ServiceCheckError",
    "ServiceReport",
    "SlowCall",
    "Verdict",
    "assert_conforms",
    "builtin_services_slowdown",
    "check_service",
]
