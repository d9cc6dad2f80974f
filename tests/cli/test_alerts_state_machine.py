"""``sas alerts ack|resolve`` follow the state machine in docs/operator.md: open -> acked ->
resolved, open -> resolved; a move it does not allow changes nothing and says so (exit 0)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from sas.state_store.alerts import OPERATOR_RESOLUTION, raise_alert
from sas.state_store.tables import Alert
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack


async def _new_alert(stack: Stack) -> int:
    now = datetime.now(UTC)
    alert = Alert(
        incident_key=fresh_id("incident"),
        severity="critical",
        kind="parked",
        task_id=fresh_id("alerted"),
        step="charge",
        failure_count=3,
        message="charge parked",
        suggested_action="sas retry",
        status="open",
        created_at=now,
        updated_at=now,
    )
    async with stack.sessions() as session, session.begin():
        await raise_alert(session, alert)
    return alert.id


async def _stored(stack: Stack, alert_id: int) -> Alert:
    async with stack.sessions() as session:
        return (await session.scalars(select(Alert).where(Alert.id == alert_id))).one()


async def test_open_acked_resolved_and_what_changes_nothing(stack: Stack) -> None:
    alert_id = await _new_alert(stack)

    acked = as_json(await sas(stack, "alerts", "ack", str(alert_id), "--json"))
    assert acked == {"id": alert_id, "before": "open", "status": "acked", "changed": True}
    assert (await _stored(stack, alert_id)).status == "acked"

    twice = await sas(stack, "alerts", "ack", str(alert_id))
    assert twice.returncode == 0 and "already acked" in twice.stdout
    assert (await _stored(stack, alert_id)).status == "acked"

    resolved = await sas(stack, "alerts", "resolve", str(alert_id))
    assert resolved.returncode == 0 and "acked -> resolved" in resolved.stdout
    stored = await _stored(stack, alert_id)
    assert stored.status == "resolved" and stored.resolution == OPERATOR_RESOLUTION
    assert stored.resolved_at is not None
    first_resolved_at = stored.resolved_at

    # Acking a resolved alert used to reopen it; now it changes nothing and says so.
    late_ack = await sas(stack, "alerts", "ack", str(alert_id))
    assert late_ack.returncode == 0 and "already resolved: ack changes nothing" in late_ack.stdout
    again = as_json(await sas(stack, "alerts", "resolve", str(alert_id), "--json"))
    assert again == {"id": alert_id, "before": "resolved", "status": "resolved", "changed": False}
    stored = await _stored(stack, alert_id)
    assert stored.status == "resolved" and stored.resolved_at == first_resolved_at


async def test_open_straight_to_resolved_and_unknown_ids(stack: Stack) -> None:
    alert_id = await _new_alert(stack)
    done = await sas(stack, "alerts", "resolve", str(alert_id))
    assert done.returncode == 0 and "open -> resolved" in done.stdout
    assert (await _stored(stack, alert_id)).status == "resolved"

    missing = await sas(stack, "alerts", "ack", "999999999")
    assert missing.returncode == 1 and "no alert 999999999" in missing.stderr
    listed = as_json(await sas(stack, "alerts", "--status", "resolved", "--json"))
    assert alert_id in [a["id"] for a in listed]
