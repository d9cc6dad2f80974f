"""The workers' sandbox runner (workflows/runner.py) behaves as Temporal's own: every recorded
history replays under it, and each context question the data converter asks a run gets the
answer the SDK's way (entering the sandbox) would have given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import _runner as sdk_runner

from sas.workflows import runner as sas_runner
from sas.workflows.runner import SandboxRunner, workflow_runner
from tests.replay.test_replay import all_workflows, recorded, recorded_history


class _CheckedInstance(sas_runner._Instance):
    """Answers as the workers' runner does, and checks each answer against the SDK's own."""

    asked: list[tuple[str, Any, Any]]

    def get_serialization_context(self, command_info: Any) -> Any:
        ours = super().get_serialization_context(command_info)
        sdks = sdk_runner._Instance.get_serialization_context(self, command_info)
        self.asked.append(("serialization", ours, sdks))
        return ours

    def get_external_store_context(self, command_info: Any) -> Any:
        ours = super().get_external_store_context(command_info)
        sdks = sdk_runner._Instance.get_external_store_context(self, command_info)
        self.asked.append(("external store", ours, sdks))
        return ours


class _CheckingRunner(SandboxRunner):
    asked: list[tuple[str, Any, Any]]

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        instance = _CheckedInstance(det, self.runner_class, self.restrictions)
        instance.asked = self.asked
        return instance


def test_the_workers_use_it() -> None:
    assert sas_runner._sdk_fits(), "this SDK's sandbox instance no longer has the methods the runner overrides"
    assert isinstance(workflow_runner(), SandboxRunner)


def test_an_sdk_without_those_methods_gets_its_own_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    class Reshaped:  # a release whose private instance class has other methods
        def _run_code(self) -> None: ...

    monkeypatch.setattr(sdk_runner, "_Instance", Reshaped)
    runner = workflow_runner()
    assert not isinstance(runner, SandboxRunner)
    assert type(runner).__name__ == "SandboxedWorkflowRunner"


@pytest.mark.parametrize("path", recorded(), ids=lambda p: p.stem)
async def test_history_replays_under_it_with_the_sdks_answers(path: Path) -> None:
    runner = _CheckingRunner(restrictions=workflow_runner().restrictions)
    object.__setattr__(runner, "asked", [])
    history = recorded_history(path)
    replayer = Replayer(workflows=all_workflows(), data_converter=pydantic_data_converter, workflow_runner=runner)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, (
        f"{path.name} does not replay under the workers' runner: {result.replay_failure}"
    )
    assert runner.asked, "the data converter asked the run nothing"
    wrong = [(kind, ours, sdks) for kind, ours, sdks in runner.asked if ours != sdks]
    assert not wrong, f"answers differ from the SDK's: {wrong[:3]}"
    # Activities' payloads get their activity's context, not only the workflow's.
    assert any(type(ours).__name__ == "ActivitySerializationContext" for _, ours, _ in runner.asked)
