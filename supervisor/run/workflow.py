"""The Supervisor workflow: sweep, decide, act, sleep - and continue-as-new to stay small.

Temporal runs at most one workflow per id, so with a fixed id per shard there is
exactly one Supervisor per shard however many Supervisor workers run for
availability. Every action it takes is also claimed in the state store (see
``supervisor/act/apply.py``), so even two Supervisors never act twice.

Between sweeps it sleeps an adaptive interval: the base interval while there is
work, growing towards the maximum while sweeps find nothing (an empty poll costs
a database round trip for nothing), and back to the base as soon as work shows up
or a Scheduler sends ``wake``. It never sleeps past the end of a cool-down it set.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from sas.supervisor.activity_defs import AlertDeliveryDefs, ApplyDefs, OrphanDefs, QueueDefs, ScanDefs
    from sas.supervisor.decide import decide
    from sas.supervisor.models import (
        ApplyInput,
        ApplyResult,
        Decision,
        DeliveryResult,
        OrphanCheckInput,
        QueueCheckInput,
        ScanInput,
        ScanResult,
        SupervisorInput,
        SupervisorPolicy,
        SweepStats,
    )
    from sas.task_models.markdown import markdown_text
    from sas.workflows.inputs import decode_model

# A Supervisor process killed mid-activity is noticed after this, not after the whole timeout.
_HEARTBEAT = timedelta(seconds=10)
_ACTIVITY_TIMEOUT = timedelta(seconds=60)
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
# A webhook delivery run is not retried by Temporal: undelivered alerts stay in the outbox.
_ONCE = RetryPolicy(maximum_attempts=1)
_RECENT_DECISIONS = 10
# A run continues as new past this history (so it recovers after a long outage): a restarted
# Supervisor worker has no cache, so its first workflow task replays the whole run, decoding every
# sweep's due steps again. Under CPU starvation a 200-sweep run's replay outlasted the 10 s
# workflow task timeout; each timeout evicts the run and the next attempt replays it all again,
# so the Supervisor stayed silent, and its queries (which replay too) timed out, while the
# starvation lasted. A short run replays in a fraction of that.
_RUN_EVENTS = 1_000
_RUN_BYTES = 1_000_000
_SHORT_RUNS = "supervisor-short-runs"
# A wake that comes while a sweep runs (a failure recorded after its scan) is kept for the next
# sweep, at once; runs from before it dropped such a wake and slept the interval.
_KEEPS_WAKES = "supervisor-keeps-wakes-during-a-sweep"
# A sweep applies its decisions a chunk at a time, and between two chunks decides first the steps
# refused for good since its scan: under a backlog of cool-downs a batch takes seconds to apply,
# which a refusal (an undo to start) should not wait out. Runs from before applied a batch at once.
_CHUNKED = "supervisor-decides-refusals-between-chunks"

_Arg = TypeVar("_Arg")
_Result = TypeVar("_Result")


@workflow.defn(name="SupervisorWorkflow")
class SupervisorWorkflow:
    def __init__(self) -> None:
        self._woken = False
        # A failure was recorded since the last look for refusals (the scan, or one between chunks).
        self._failures_since_look = False
        self._stats = SweepStats()
        # The latest decisions, newest first, for the UI's current details (this run's only).
        self._recent: list[str] = []

    @workflow.run
    async def run(self, raw: RawValue) -> None:
        state = decode_model(raw, SupervisorInput, "Supervisor")
        self._stats.sweeps = state.sweeps_done
        shard = state.shard
        interval = state.interval_s
        cursor = dict(state.orphan_cursor)
        backlog = dict(state.backlog)
        last_orphan_check: datetime | None = None
        last_queue_check: datetime | None = None
        delivery: workflow.ActivityHandle[DeliveryResult] | None = None
        sweeps_this_run = 0
        while True:
            keeps_wakes = workflow.patched(_KEEPS_WAKES)
            if keeps_wakes:
                self._woken = False
            self._failures_since_look = False
            scan = await _run(ScanDefs.scan, ScanInput(shard=shard), "find the steps due and the alerts to send")
            policy = scan.policy
            now = workflow.now()
            decisions = [decide(step, policy, now) for step in scan.due]
            work = bool(decisions or scan.unsent)
            if work and workflow.patched(_CHUNKED):
                self._stats.last = await self._apply_in_chunks(decisions, policy, shard)
            elif work:
                self._stats.last = await _run(
                    ApplyDefs.apply,
                    ApplyInput(decisions=decisions, shard=shard),
                    f"apply {len(decisions)} decision(s), each after asking Temporal; send the outbox",
                )
            self._recent = [
                f"{now.isoformat(timespec='seconds')} `{d.task_id}` {d.step}: **{d.kind}** "
                f"(FailureCount {d.failure_count}) {markdown_text(d.reason, 120)}"
                for d in reversed(decisions)
                if d.kind != "wait"
            ] + self._recent
            del self._recent[_RECENT_DECISIONS:]
            # Not a command: the UI reads it through a query, so a sweep adds nothing to history.
            workflow.set_current_details(_details(shard, now, scan, decisions, self._stats, self._recent))

            if _due(last_orphan_check, policy.orphan_check_s, now):
                last_orphan_check = now
                orphans = await _run(
                    OrphanDefs.check_orphans,
                    OrphanCheckInput(shard=shard, cursor=cursor),
                    "compare quiet tasks with Temporal: ended from outside, gone, stuck, drifted",
                )
                cursor = orphans.cursor
                self._stats.orphans_found += len(orphans.orphans)
                work = work or bool(orphans.orphans)
            # Queues are not sharded: the first shard looks at them.
            if shard == 0 and _due(last_queue_check, policy.queue_check_s, now):
                last_queue_check = now
                queues = await _run(
                    QueueDefs.check_queues,
                    QueueCheckInput(backlog=backlog),
                    "count the task queues' pollers and backlog",
                )
                backlog = queues.backlog
                self._stats.queue_checks += 1
                self._stats.breakers_holding = queues.held

            if policy.webhook and scan.undelivered and (delivery is None or delivery.done()):
                delivery = workflow.start_activity_method(
                    AlertDeliveryDefs.deliver_alerts,
                    summary=f"deliver {scan.undelivered} alert(s) to the webhook",
                    start_to_close_timeout=_ACTIVITY_TIMEOUT,
                    heartbeat_timeout=_HEARTBEAT,
                    retry_policy=_ONCE,
                )

            interval = _next_interval(interval, policy, work)
            self._stats.interval_s = interval
            self._stats.sweeps += 1
            sweeps_this_run += 1
            if sweeps_this_run >= policy.sweeps_per_run or workflow.info().is_continue_as_new_suggested() or _long():
                await _settle(delivery)
                workflow.continue_as_new(
                    SupervisorInput(
                        sweeps_done=self._stats.sweeps,
                        shard=shard,
                        interval_s=interval,
                        orphan_cursor=cursor,
                        backlog=backlog,
                    )
                )
            sleep = interval
            waits = [d.next_look_at for d in decisions if d.kind == "wait"]
            if waits:
                # Be there when the earliest cool-down or backoff ends, however idle the rest is.
                sleep = max(min(sleep, (min(waits) - workflow.now()).total_seconds()), 0.0)
            if len(scan.due) >= policy.batch_size and work and self._stats.last and self._stats.last.claimed:
                # A full batch that moved: more are due behind it. Sweep again at once rather than
                # let a backlog drain one batch per interval (the timer stays, only shorter).
                sleep = 0.0
            if not keeps_wakes:
                self._woken = False
            try:
                await workflow.wait_condition(lambda: self._woken, timeout=timedelta(seconds=max(sleep, 0.001)))
            except TimeoutError:
                pass
            if self._woken:
                interval = policy.interval_s

    async def _apply_in_chunks(self, decisions: list[Decision], policy: SupervisorPolicy, shard: int) -> ApplyResult:
        """Apply ``decisions`` (extended with any decided on the way) ``policy.apply_chunk`` at a
        time. Before each chunk after the first, if a failure was recorded since the last look,
        the steps refused for good that are due now are decided and applied first."""
        total = ApplyResult()
        size, count = policy.apply_chunk, len(decisions)
        chunks = [decisions[i : i + size] for i in range(0, len(decisions), size)] or [[]]
        looked_at = {(d.task_id, d.step) for d in decisions}
        for number, chunk in enumerate(chunks):
            if number and self._failures_since_look:
                self._failures_since_look = False
                found = await _run(
                    ScanDefs.scan,
                    ScanInput(shard=shard, refusals_only=True),
                    "find the steps refused for good since this sweep's scan",
                )
                now = workflow.now()
                refusals = [decide(s, found.policy, now) for s in found.due if (s.task_id, s.step) not in looked_at]
                if refusals:
                    looked_at.update((d.task_id, d.step) for d in refusals)
                    decisions.extend(refusals)
                    total = _added(total, await self._apply(refusals, shard, "refused for good since the scan"))
            first = number * size + 1
            which = f"{first}-{first + len(chunk) - 1} of {count}" if chunk else "none due"
            total = _added(total, await self._apply(chunk, shard, which))
        return total

    @staticmethod
    async def _apply(decisions: list[Decision], shard: int, which: str) -> ApplyResult:
        return await _run(
            ApplyDefs.apply,
            ApplyInput(decisions=decisions, shard=shard),
            f"apply {len(decisions)} decision(s) ({which}), each after asking Temporal; send the outbox",
        )

    @workflow.signal(name="wake")
    def wake(self) -> None:
        """A Scheduler recorded a failure: sweep now rather than at the next tick."""
        self._woken = True
        self._failures_since_look = True

    @workflow.query(name="sweeps")
    def sweeps(self) -> int:
        return self._stats.sweeps

    @workflow.query(name="stats")
    def stats(self) -> SweepStats:
        return self._stats


def _details(
    shard: int, now: datetime, scan: ScanResult, decisions: list[Any], stats: SweepStats, recent: list[str]
) -> str:
    """The Supervisor's current details (markdown): its last sweep, what it found and decided."""
    kinds: dict[str, int] = {}
    for d in decisions:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    decided = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "nothing"
    alerts = sum(1 for d in decisions if d.alert is not None)
    lines = [
        f"**Supervisor, shard {shard}** · last sweep {now.isoformat(timespec='seconds')} · "
        f"sweep {stats.sweeps + 1} · next in about {stats.interval_s or scan.policy.interval_s:.0f} s",
        f"**Last sweep:** {len(scan.due)} steps due · decided {decided} · "
        f"{alerts} alerts raised · {scan.resolved} alerts resolved",
        f"**Outbox:** {scan.unsent} decisions not yet sent · {scan.undelivered} alerts waiting for the webhook",
        f"**Incidents:** {scan.incidents} open, {scan.incident_tasks} tasks in them (`sas incidents`)",
        f"**Since start:** {stats.orphans_found} orphaned tasks found · {stats.queue_checks} queue checks",
        "Open alerts: `sas alerts` · one task's story: `sas show <id>`",
    ]
    if recent:
        lines.append("**Recent decisions** (newest first):\n\n" + "\n".join(f"- {line}" for line in recent))
    return "\n\n".join(lines)


async def _run(declared: Callable[[Any, _Arg], Awaitable[_Result]], arg: _Arg, summary: str) -> _Result:
    """One sweep activity, retried by Temporal; its name and result type come from its declaration,
    and ``summary`` says in the UI what it does."""
    return await workflow.execute_activity_method(
        declared,
        arg,
        summary=summary,
        start_to_close_timeout=_ACTIVITY_TIMEOUT,
        heartbeat_timeout=_HEARTBEAT,
        retry_policy=_RETRY,
    )


def _added(a: ApplyResult, b: ApplyResult) -> ApplyResult:
    return ApplyResult(**{name: getattr(a, name) + getattr(b, name) for name in ApplyResult.model_fields})


def _long() -> bool:
    """This run's history is past the bound a cold replay should stay within (patched: a run
    recorded before the bound goes on as it did)."""
    info = workflow.info()
    return (
        info.get_current_history_length() > _RUN_EVENTS or info.get_current_history_size() > _RUN_BYTES
    ) and workflow.patched(_SHORT_RUNS)


def _due(last: datetime | None, every_s: float, now: datetime) -> bool:
    return every_s > 0 and (last is None or (now - last).total_seconds() >= every_s)


def _next_interval(current: float | None, policy: SupervisorPolicy, work: bool) -> float:
    """Adaptive sweep interval: the base while there is work, growing while idle."""
    if work or current is None:
        return policy.interval_s
    return min(max(current, policy.interval_s) * policy.idle_backoff, policy.max_interval_s)


async def _settle(handle: workflow.ActivityHandle[Any] | None) -> None:
    if handle is None or handle.done():
        return
    try:
        await handle
    except Exception:  # noqa: BLE001 - a failed delivery run leaves its alerts in the outbox
        pass
