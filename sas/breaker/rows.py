"""The circuit breakers' shared rows: read by every worker every few seconds, written only on a
transition. Each transition is a compare-and-set on the row's version, so when several workers
see the same failures one of them opens the breaker and the others just read it open; an
opening raises the service's one ``breaker_open`` alert in the same transaction, and the
closing resolves it. An operator's forced transition also writes an audit entry."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from sas.breaker.model import BreakerStateName, BreakerView, ReleasePlan
from sas.state_store.alerts import active_alert, raise_alert, resolve_alert
from sas.state_store.rate_limits import store_now
from sas.state_store.tables import Alert, AuditEntry, Breaker, BreakerWindow

ALERT_KIND = "breaker_open"
# Audit entries of forced transitions are filed under this pseudo task id, one per service.
AUDIT_PREFIX = "service:"


def alert_key(service: str) -> str:
    return f"{ALERT_KIND}:{service}"


def view_of(row: Breaker) -> BreakerView:
    return BreakerView(
        service=row.service,
        state=cast("BreakerStateName", row.state),
        since=row.since,
        outage_since=row.outage_since,
        hold_until=row.hold_until,
        retry_at=row.retry_at,
        probe_by=row.probe_by,
        probe_until=row.probe_until,
        calls=row.calls,
        failures=row.failures,
        last_error=row.last_error,
        forced_by=row.forced_by,
        version=row.version,
        release_since=row.release_since,
        release_waves_at=row.release_waves_at,
        release_let=row.release_let or 0,
        release_ok=row.release_ok or 0,
    )


async def read_breakers(session: AsyncSession) -> dict[str, BreakerView]:
    """Every service's breaker row (a service never tripped has none: it is closed)."""
    return {row.service: view_of(row) for row in (await session.scalars(select(Breaker))).all()}


async def _ensure_row(session: AsyncSession, service: str, now: datetime) -> Breaker:
    row = await session.get(Breaker, service)
    if row is None:
        row = Breaker(service=service, state="closed", since=now, calls=0, failures=0, version=0, updated_at=now)
        session.add(row)
        await session.flush()
    return row


async def _cas(session: AsyncSession, service: str, version: int, values: dict[str, Any]) -> bool:
    result = await session.execute(
        update(Breaker)
        .where(Breaker.service == service, Breaker.version == version)
        .values(version=version + 1, **values)
        .execution_options(synchronize_session=False)
    )
    return bool(cast("CursorResult[Any]", result).rowcount)


def _open_alert(service: str, message: str, now: datetime, failures: int, last_error: str | None) -> Alert:
    return Alert(
        incident_key=alert_key(service),
        severity="critical",
        kind=ALERT_KIND,
        task_id=None,
        step=None,
        failure_count=failures,
        message=message,
        last_error=last_error,
        suggested_action=(
            f"fix the {service} service; its steps wait unstarted and the breaker closes itself after a good probe"
            f" (`sas services` shows it; `sas services close {service}` forces it closed)"
        ),
        status="open",
        created_at=now,
        updated_at=now,
        delivery_attempts=0,
    )


async def trip(
    session: AsyncSession,
    service: str,
    now: datetime,
    open_s: float,
    *,
    max_hold_s: float,
    seen_version: int,
    calls: int,
    failures: int,
    last_error: str | None,
    canary: bool = False,
) -> BreakerView | None:
    """Open the breaker (closed -> open, or half-open -> open after a failed probe) if nobody
    changed it since ``seen_version``. The row as it is afterwards, or None if another worker
    moved it first (the caller re-reads). ``canary``: a canary of the release failed, which
    opens it only while the release is still at its canaries."""
    async with session.begin():
        row = await _ensure_row(session, service, now)
        if row.version != seen_version or row.state == "open":
            return None
        if canary and (row.release_since is None or row.release_waves_at is not None):
            return None
        reopening = row.state == "half_open"
        outage_since = row.outage_since if reopening and row.outage_since else now
        hold_until = row.hold_until if reopening and row.hold_until else now + timedelta(seconds=max_hold_s)
        values = {
            "state": "open",
            "since": now,
            "outage_since": outage_since,
            "hold_until": hold_until,
            "retry_at": now + timedelta(seconds=open_s),
            "probe_by": None,
            "probe_until": None,
            "calls": calls,
            "failures": failures,
            "last_error": last_error,
            "updated_at": now,
            **_NO_RELEASE,
        }
        if not await _cas(session, service, row.version, values):
            return None
        what = (
            "its probe failed"
            if reopening
            else "a canary of its release failed"
            if canary
            else f"{failures} of its last {calls} calls failed"
        )
        await raise_alert(
            session,
            _open_alert(
                service,
                f"circuit breaker of {service} is open since {outage_since.isoformat(timespec='seconds')}: {what};"
                " no request reaches it and its steps wait",
                now,
                failures,
                last_error,
            ),
        )
    return await _reread(session, service)


async def claim_probe(
    session: AsyncSession, service: str, now: datetime, worker: str, probe_for_s: float, *, seen_version: int
) -> BreakerView | None:
    """Take the next probe (open -> half-open, owned by ``worker`` until ``probe_for_s`` from now)."""
    async with session.begin():
        row = await session.get(Breaker, service)
        if row is None or row.version != seen_version or not view_of(row).probe_due(now):
            return None
        values = {
            "state": "half_open",
            "since": now,
            "probe_by": worker,
            "probe_until": now + timedelta(seconds=probe_for_s),
            "updated_at": now,
        }
        if not await _cas(session, service, row.version, values):
            return None
    return await _reread(session, service)


async def close(
    session: AsyncSession, service: str, now: datetime, why: str, *, seen_version: int, release: bool = True
) -> bool:
    """Close the breaker after a call went through (a probe, or a call after max_hold_s); its alert
    resolves. ``release``: the work it held is let go in stages (``sas/breaker/release.py``); not
    after max_hold_s, when calls were going through already."""
    async with session.begin():
        row = await session.get(Breaker, service)
        if row is None or row.version != seen_version or row.state == "closed" or row.forced_by is not None:
            return False
        values = _closed_values(now) | (await _release_values(session) if release else _NO_RELEASE)
        if not await _cas(session, service, row.version, values):
            return False
        await _resolve(session, service, now, why)
    return True


async def force(
    session: AsyncSession, service: str, state: BreakerStateName, by: str, reason: str, now: datetime
) -> tuple[str, str]:
    """An operator's forced transition, audited: ``open`` holds the service's work until forced
    ``closed`` (no probe, no time limit); ``closed`` ends an outage at once. Returns (before, after)."""
    async with session.begin():
        row = await _ensure_row(session, service, now)
        before = row.state + (" (forced)" if row.forced_by else "")
        if state == "open":
            values: dict[str, Any] = {
                "state": "open",
                "since": now,
                "outage_since": row.outage_since if row.state != "closed" and row.outage_since else now,
                "hold_until": None,
                "retry_at": None,
                "probe_by": None,
                "probe_until": None,
                "forced_by": by,
                "last_error": f"forced open by {by}: {reason}" if reason else f"forced open by {by}",
                "updated_at": now,
                **_NO_RELEASE,
            }
            after = "open (forced)"
        else:
            # An operator closing a breaker that held work lets it go in stages, as a probe does.
            held = row.state != "closed"
            values = _closed_values(now) | (await _release_values(session) if held else {})
            after = "closed"
        if not await _cas(session, service, row.version, values):
            raise RuntimeError(f"the {service} breaker changed while forcing it; try again")
        if state == "open":
            await raise_alert(
                session,
                _open_alert(service, f"circuit breaker of {service} forced open by {by}: {reason}", now, 0, None),
            )
        else:
            await _resolve(session, service, now, f"forced closed by {by}")
        session.add(
            AuditEntry(
                task_id=f"{AUDIT_PREFIX}{service}",
                run_id=f"breaker:{row.version + 1}",
                seq=0,
                step=None,
                action=f"breaker_{state}",
                actor=by,
                reason=reason,
                changed=f"breaker {before} -> {after}",
                at=now,
            )
        )
    return before, after


async def begin_release(session: AsyncSession, service: str, now: datetime, plan: ReleasePlan) -> bool:
    """Begin the staged release of ``service``'s work, as a closing breaker does, for a backlog let
    go at once by someone else (an incident retried, cool-downs ended together). True when begun.

    Not begun while the breaker holds (its closing begins the release), nor while a release under
    way still paces its calls: it could let no more go at once than a new one's canaries, so the
    backlog joins it and there is one release. A release whose allowance ran ahead of its calls
    (its backlog drained, the row not yet told) would let the new backlog go at once: one begins."""
    async with session.begin():
        row = await _ensure_row(session, service, now)
        if row.state != "closed":
            return False
        if row.release_since is not None:
            waves_at = row.release_waves_at
            elapsed = None if waves_at is None else await store_now(session) - waves_at
            if plan.allowed(elapsed) - (row.release_let or 0) <= plan.canaries:
                return False
        return await _cas(session, service, row.version, await _release_values(session) | {"updated_at": now})


async def report_window(
    session: AsyncSession, service: str, worker: str, calls: int, failures: int, now: datetime
) -> None:
    """One worker's counting window for ``service`` (replaced; for ``sas services``)."""
    async with session.begin():
        await session.execute(
            delete(BreakerWindow).where(BreakerWindow.service == service, BreakerWindow.worker == worker)
        )
        session.add(BreakerWindow(service=service, worker=worker, calls=calls, failures=failures, updated_at=now))


async def recent_windows(session: AsyncSession, since: datetime) -> dict[str, tuple[int, int]]:
    """Calls and failures per service over the workers' windows reported since ``since``."""
    rows = (await session.scalars(select(BreakerWindow).where(BreakerWindow.updated_at >= since))).all()
    totals: dict[str, tuple[int, int]] = {}
    for row in rows:
        calls, failures = totals.get(row.service, (0, 0))
        totals[row.service] = (calls + row.calls, failures + row.failures)
    return totals


# No release under way (a breaker opening again ends the one it had).
_NO_RELEASE: dict[str, Any] = {"release_since": None, "release_waves_at": None, "release_let": 0, "release_ok": 0}


async def _release_values(session: AsyncSession) -> dict[str, Any]:
    """A release beginning now, on the state store's clock (every worker's allowance counts from it)."""
    return _NO_RELEASE | {"release_since": await store_now(session)}


def _closed_values(now: datetime) -> dict[str, Any]:
    return {
        "state": "closed",
        "since": now,
        "outage_since": None,
        "hold_until": None,
        "retry_at": None,
        "probe_by": None,
        "probe_until": None,
        "forced_by": None,
        "updated_at": now,
    }


async def _resolve(session: AsyncSession, service: str, now: datetime, why: str) -> None:
    alert = await active_alert(session, alert_key(service))
    if alert is not None:
        await resolve_alert(session, alert, now, why)


async def _reread(session: AsyncSession, service: str) -> BreakerView | None:
    async with session.begin():
        row = await session.get(Breaker, service, populate_existing=True)
        return None if row is None else view_of(row)
