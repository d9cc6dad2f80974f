"""How workers run the workflows: in Temporal's sandbox, with sas's own modules passed through.

The passed-through modules are deterministic and have no import side effects. Without this,
the sandbox imports them again for every workflow run, and that took about a third of the
worker's CPU in bench/throughput.py (docs/benchmarks.md). The sandbox still guards the
workflow code itself: no wall clock, random, I/O or threads."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

PASSED_THROUGH = ("workflows", "task_models", "supervisor", "pydantic", "pydantic_core", "annotated_types")


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH))
