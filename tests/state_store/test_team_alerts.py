"""What one team's operator counts of the alerts: the alerts folded into open incidents are
counted for the team's task types only (``count_folded(task_types=...)``), as the alerts listed
are (``owned_by``), on each backend."""

from __future__ import annotations

from sas.state_store.alerts import count_folded
from sas.state_store.incident_tables import Incident
from sas.state_store.incidents import join, raise_incident
from sas.state_store.tables import Alert
from tests.helpers import fresh_id
from tests.state_store.test_mirror import NOW
from tests.state_store.test_redrive import accepted


def an_alert(key: str, task_id: str | None, step: str = "charge") -> Alert:
    return Alert(
        incident_key=key,
        severity="warning",
        kind="incident" if task_id is None else "step_failing",
        task_id=task_id,
        step=step,
        message="m",
        suggested_action="s",
        status="open",
        created_at=NOW,
        updated_at=NOW,
    )


async def test_the_folded_count_of_a_team_is_its_own_tasks_alerts(sessions, writer) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = fresh_id("ours"), fresh_id("theirs")
    await writer.accept(accepted(ours, "c1"))
    await writer.accept(accepted(theirs, "c2").model_copy(update={"task_type": "gift"}))
    async with sessions() as s:
        incident = Incident(
            cause_key="k", step="charge", error_text="503", first_at=NOW, latest_at=NOW, task_count=2, sample=[]
        )
        row, _, _ = await raise_incident(s, an_alert(fresh_id("incident"), None), incident)
        for task_id in (ours, theirs):
            join(s, row.id, task_id, "charge", NOW)
            s.add(an_alert(fresh_id("alert"), task_id))  # folded into the incident
        await s.commit()
    async with sessions() as s:
        assert await count_folded(s, "open") >= 2
        assert await count_folded(s, "open", ["gift"]) == 1
        assert await count_folded(s, "open", ["no_such_type"]) == 0
