"""No heavy import sits in the workflow sandbox: the workflow modules pull in neither the
database stack nor the HTTP client, and every workflow validates in a sandbox that
refuses them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxMatcher, SandboxRestrictions

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "httpx", "httpcore", "aiosqlite", "asyncpg", "alembic", "starlette", "cryptography")


def test_workflow_modules_import_nothing_heavy() -> None:
    """In a fresh interpreter: what importing the workflows (what the sandbox loads, and what
    its passthrough imports load in the host) adds to sys.modules."""
    code = (
        "import sys, json; before = set(sys.modules); import workflows; "
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not loaded & set(HEAVY), f"the workflow modules import {sorted(loaded & set(HEAVY))}"


@pytest.mark.parametrize("name", ["OrderWorkflow", "PreorderWorkflow"])
async def test_workflows_validate_in_a_sandbox_that_refuses_heavy_modules(name: str) -> None:
    import workflows

    cls = getattr(workflows, name)
    restrictions = dataclasses.replace(
        SandboxRestrictions.default,
        invalid_modules=SandboxRestrictions.default.invalid_modules | SandboxMatcher(access=set(HEAVY)),
    )
    # (async: the instance is created on a running loop) Raises RestrictedWorkflowAccessError if the module, imported inside the sandbox, touches one.
    SandboxedWorkflowRunner(restrictions=restrictions).prepare_workflow(workflow._Definition.must_from_class(cls))
