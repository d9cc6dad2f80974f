"""``supervisor.deliver_alerts``: new and escalated alerts POSTed to the operators' webhook.

An incident (``supervisor/alert/incident_check.py``) is sent when it opens, escalates, doubles and
resolves, with its cause, count, times and sample under ``incident``; the alerts of its tasks
are folded into it and not sent.

Signed (Standard Webhooks) and sent through the checked, pinned sender of
``activities/outbound.py``; a failed delivery is tried again later with a growing delay,
never holding up a sweep, and given up after the configured attempts."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from sas.activities.outbound import WebhookSender
from sas.settings import Settings
from sas.settings.supervisor import WebhookSettings
from sas.state_store import tables
from sas.state_store.alerts import INCIDENT, claim_delivery, record_delivery, task_types_of_alerts, undelivered_alerts
from sas.state_store.incidents import get_incident, incident_view
from sas.supervisor.activity_defs import AlertDeliveryDefs
from sas.supervisor.activity_support import beat
from sas.supervisor.models import DeliveryResult
from sas.workflows.registry import TaskTypeError, owning_team

log = logging.getLogger("sas.supervisor")

# Alerts posted per run; the rest wait for the next one.
_DELIVERY_BATCH = 50


class AlertDeliveryActivities(AlertDeliveryDefs):
    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self._sessions = sessions
        self._settings = settings

    @activity.defn(name="supervisor.deliver_alerts")
    async def deliver_alerts(self) -> DeliveryResult:
        """POST new and escalated alerts to their webhook - the owning team's, else the
        platform's - signed (Standard Webhooks) through the checked, pinned sender of
        activities/outbound.py; a failed delivery is tried again later with a growing delay,
        never holding up a sweep. One the policy refuses is given up, and so is one with nowhere
        to go (its team has no webhook and the platform none), so it never holds up the rest."""
        result = DeliveryResult()
        if not self._hooks():
            return result
        async with self._sessions() as session:
            alerts = await undelivered_alerts(session, datetime.now(UTC), _DELIVERY_BATCH)
            about = await task_types_of_alerts(session, [a.id for a in alerts])
        if not alerts:
            return result  # most sweeps: no client (and TLS context) built for nothing
        routed: dict[int, tuple[WebhookSettings, list[tuple[tables.Alert, str | None]]]] = {}
        for alert in alerts:
            team = _owner(about.get(alert.id, set()))
            hook = self._hook_for(team)
            if hook is None:
                async with self._sessions() as session:
                    await record_delivery(session, alert.id, datetime.now(UTC), False, None)
                log.info("alert not sent: no webhook for it", extra={"fields": {"alert_id": alert.id, "team": team}})
                continue
            routed.setdefault(id(hook), (hook, []))[1].append((alert, team))
        for hook, routed_alerts in routed.values():
            async with WebhookSender(self._settings.outbound, hook.secret) as sender:
                for alert, team in routed_alerts:
                    beat()
                    ok = await self._deliver(sender, hook, alert, team)
                    if ok is None:
                        continue  # another Supervisor (shard) is posting it
                    result.delivered += ok
                    result.failed += not ok
        return result

    def _hooks(self) -> list[WebhookSettings]:
        """Every webhook alerts can go to: the platform's and each team's that has a URL."""
        hooks = [self._settings.supervisor.webhook, *(t.webhook for t in self._settings.teams.values())]
        return [h for h in hooks if h.url]

    def _hook_for(self, team: str | None) -> WebhookSettings | None:
        """Where an alert of ``team`` goes: the team's own webhook, else the platform's; None if neither is set."""
        own = self._settings.teams.get(team) if team is not None else None
        if own is not None and own.webhook.url:
            return own.webhook
        platform = self._settings.supervisor.webhook
        return platform if platform.url else None

    async def _deliver(
        self, sender: WebhookSender, hook: WebhookSettings, alert: tables.Alert, team: str | None
    ) -> bool | None:
        """One alert posted to ``hook``: whether it was delivered; None if another Supervisor claimed it."""
        assert hook.url is not None, "routed only to a webhook with a URL"
        claimed_at = datetime.now(UTC)
        lease = claimed_at + timedelta(seconds=hook.timeout_s + 5)
        async with self._sessions() as session:
            if not await claim_delivery(session, alert.id, alert.delivery_attempts, claimed_at, lease):
                return None
        payload = alert_payload(alert, team)
        # Same id across retries of this content; an escalation is a new message.
        message_id = f"alert-{alert.id}-{int(alert.updated_at.timestamp() * 1000)}"
        if alert.kind == INCIDENT:
            async with self._sessions() as session:
                found = await get_incident(session, alert.id)
            if found is not None:
                payload["incident"] = incident_view(*found)
                # An incident is refreshed every sweep: its id names the change instead.
                message_id = f"incident-{alert.id}-{alert.status}-{alert.severity}-{found[1].delivered_count}"
        body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        delivery = await sender.send(hook.url, message_id, body, hook.timeout_s)
        ok = delivery.ok
        now = datetime.now(UTC)
        attempts = alert.delivery_attempts + 1
        next_try = None
        if not ok and delivery.retryable and attempts < hook.max_attempts:
            next_try = now + timedelta(seconds=hook.retry_delay_s * 2 ** (attempts - 1))
        elif not ok:
            log.error(
                "webhook gave up",
                extra={"fields": {"alert_id": alert.id, "attempts": attempts, "error": delivery.problem}},
            )
        async with self._sessions() as session:
            await record_delivery(session, alert.id, now, ok, next_try)
        return ok


def _owner(task_types: set[str]) -> str | None:
    """The team that owns an alert about these task types (None: the platform's)."""
    try:
        return owning_team(task_types) if task_types else None
    except TaskTypeError:
        return None  # a broken registration: the platform's webhook still hears of it


def alert_payload(alert: tables.Alert, team: str | None = None) -> dict[str, object]:
    """The webhook's JSON body; ``team``: the team that owns it (None: the platform's)."""
    return {
        "id": alert.id,
        "team": team,
        "severity": alert.severity,
        "kind": alert.kind,
        "task_id": alert.task_id,
        "step": alert.step,
        "failure_count": alert.failure_count,
        "message": alert.message,
        "last_error": alert.last_error,
        "suggested_action": alert.suggested_action,
        "status": alert.status,
        "created_at": alert.created_at.isoformat(),
        "updated_at": alert.updated_at.isoformat(),
    }
