"""A workflow whose payload its workers cannot decrypt never reaches sas's code: its workflow
task fails, again and again, before the workflow runs. Temporal marks it
(``TemporalReportedProblems``) and the Supervisor raises one alert for it."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from sas.runtime.connect import connect
from sas.settings import EncryptionSettings, TemporalSettings
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import as_json, sas
from tests.encryption.conftest import encryption_settings, new_key
from tests.helpers import fresh_id, wait_until
from tests.stack import order, start_stack


async def test_an_undecryptable_workflow_is_reported_once(
    temporal_address: str, services: ServiceProcess, sqlite_url: str, encryption: EncryptionSettings
) -> None:
    workers_client = await connect(TemporalSettings(address=temporal_address), "test", encryption)
    # A submitter with a key the workers were never given.
    stranger: Client = await connect(
        TemporalSettings(address=temporal_address), "test", encryption_settings("k9", k9=new_key())
    )
    async with start_stack(workers_client, temporal_address, services.url, sqlite_url) as stack:
        stack.settings.supervisor.__dict__["queue_check_s"] = 0.5  # read at every sweep
        task_id = fresh_id("undecryptable")
        await stranger.start_workflow(
            "OrderWorkflow", order(), id=task_id, task_queue=stack.settings.temporal.task_queue
        )

        async def stuck() -> list[Any]:
            return [a for a in await stack.alerts(task_id) if a.kind == "workflow_stuck"]

        [alert] = await wait_until(stuck, lambda a: len(a) == 1, timeout=90, what="the stuck-workflow alert")
        assert alert.status == "open" and "keeps failing" in alert.message and "WorkflowTaskFailed" in alert.message
        assert "SAS_ENCRYPTION__KEYS" in alert.suggested_action
        assert await stack.record(task_id) is None  # it never reached the mirror
        # ... and `sas list` shows it all the same, as stuck, with the reason.
        listed = as_json(await sas(stack, "list", "--json"))
        [row] = [r for r in listed if r["task_id"] == task_id]
        assert row["state"] == "Stuck" and row["in_mirror"] is False and "keeps failing" in row["why"]
        only_stuck = as_json(await sas(stack, "list", "--state", "stuck", "--json"))
        assert [r["task_id"] for r in only_stuck] == [task_id]
        shown = await sas(stack, "list")
        assert (
            shown.returncode == 0 and task_id in shown.stdout and "1 stuck before the mirror saw them" in shown.stdout
        )
        await stranger.get_workflow_handle(task_id).terminate("test over")
