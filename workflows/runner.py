"""How workers run the workflows: in Temporal's sandbox, passing through only the data models.

The sandbox re-imports a workflow's module (and its package) for every workflow run, so that
the workflow code itself is guarded: no wall clock, random, I/O or threads, and no state left
over from another run. A module passed through is shared with the host instead, and not
guarded. So only what needs it is:

- ``task_models`` and ``supervisor.models``: the pydantic models that cross the sandbox's edge
  (workflow and activity inputs and results, signals). Passed through, they are the same
  classes in the host's data converter and in the workflow, and are not rebuilt per run.
- pydantic, pydantic_core and annotated_types, the stdlib and temporalio are already in
  Temporal's default passthrough list.

``workflows`` and ``supervisor`` themselves are not passed through: their workflow modules are
re-imported per run. That costs CPU (about 14 ms per new workflow run here, mostly
``@workflow.defn`` re-applied to the three classes that ``workflows/__init__.py`` imports),
which passing the whole packages through used to save (docs/benchmarks.md).
"""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

PASSED_THROUGH = ("sas.task_models", "sas.supervisor.models")


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))
