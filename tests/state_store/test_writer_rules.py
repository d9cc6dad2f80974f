"""The one writer's rules (``sas.state_store.mirror_rules``), on SQLite and PostgreSQL and on both of
its paths: a session (``sas.state_store.mirror``) and the hot path's own connections
(``sas.state_store.agent_writes``), which run the same statements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.testing import ActivityEnvironment

from sas.settings import DatabaseSettings, Settings, SupervisorSettings
from sas.state_store import mirror
from sas.state_store.agent_writes.writer import StepWriter
from sas.state_store.mirror import record_transitions
from sas.state_store.queries import due_steps, finished_page, get_task, waiting_tasks_by_queue
from sas.state_store.rows import StepRow
from sas.supervisor.detect.scan import ScanActivities
from sas.supervisor.models import ScanInput
from sas.task_models import StepState, StepTransition, TaskState
from sas.task_models.versions import Phase, version_of
from tests.helpers import fresh_id
from tests.state_store.test_mirror import NOW, accepted, transition

Write = Callable[[StepTransition], Awaitable[None]]


@pytest.fixture(params=["session", "hot_path"])
def write(request: pytest.FixtureRequest, sessions: async_sessionmaker[AsyncSession], writer: StepWriter) -> Write:
    """One transition, written the one way or the other."""
    if request.param == "hot_path":
        return writer.write

    async def via_session(t: StepTransition) -> None:
        async with sessions() as session:
            await record_transitions(session, [t])

    return via_session


async def reserve(sessions: async_sessionmaker[AsyncSession], task_id: str) -> StepRow:
    async with sessions() as session:
        record = await get_task(session, task_id)
    assert record is not None
    return next(r for r in record.steps if r.name == "reserve")


async def task_state(sessions: async_sessionmaker[AsyncSession], task_id: str) -> str:
    async with sessions() as session:
        record = await get_task(session, task_id)
    assert record is not None
    return record.task.state


async def test_an_older_or_equal_version_loses(sessions, writer, write: Write) -> None:
    task_id = fresh_id("ver")
    await writer.accept(accepted(task_id))
    await write(transition(task_id, 5, StepState.PROCESSING, 1, Phase.AGENT_STARTED, locked_by="w5"))
    await write(transition(task_id, 3, StepState.FAILED, failure_count=1, last_error="late"))
    await write(transition(task_id, 5, StepState.COMPENSATED, 1, Phase.AGENT_STARTED))  # equal: loses too
    row = await reserve(sessions, task_id)
    assert (row.state, row.locked_by, row.last_error) == ("Processing", "w5", None)
    assert row.version == version_of(5, 1, Phase.AGENT_STARTED)


async def test_a_write_of_another_chain_is_refused(sessions, writer, write: Write) -> None:
    task_id = fresh_id("chain")
    await writer.accept(accepted(task_id, chain="chain-a"))
    other = transition(task_id, 9, StepState.PROCESSED, task_state=TaskState.PROCESSED, chain_id="chain-b")
    await write(other)
    assert ((await reserve(sessions, task_id)).state, await task_state(sessions, task_id)) == ("Pending", "Pending")
    await write(other.model_copy(update={"chain_id": "chain-a"}))
    assert ((await reserve(sessions, task_id)).state, await task_state(sessions, task_id)) == ("Processed", "Processed")


async def test_failure_count_never_goes_down_but_for_an_operators_reset(sessions, writer, write: Write) -> None:
    task_id = fresh_id("fc")
    await writer.accept(accepted(task_id))
    await write(transition(task_id, 1, StepState.FAILED, failure_count=3))
    await write(transition(task_id, 2, StepState.PROCESSING, 1, Phase.AGENT_STARTED, failure_count=1))
    row = await reserve(sessions, task_id)
    assert (row.failure_count, row.resets) == (3, 0)
    await write(transition(task_id, 3, StepState.PROCESSING, failure_count=0, reset_failure_count=True))
    row = await reserve(sessions, task_id)
    assert (row.failure_count, row.resets) == (0, 1)


async def test_a_note_is_stored_and_kept_until_another_comes(sessions, writer, write: Write) -> None:
    task_id = fresh_id("note")
    await writer.accept(accepted(task_id))
    waits = "approval by ops, until 2026-11-24T12:00:00Z"
    await write(transition(task_id, 1, StepState.WAITING, note=waits, task_state=TaskState.PROCESSING))
    assert ((await reserve(sessions, task_id)).state, (await reserve(sessions, task_id)).note) == ("Waiting", waits)
    await write(transition(task_id, 2, StepState.PROCESSED))  # no note: the one there stays
    assert (await reserve(sessions, task_id)).note == waits
    await write(transition(task_id, 3, StepState.SKIPPED, note="condition false: amount < 100"))
    assert (await reserve(sessions, task_id)).note == "condition false: amount < 100"


async def test_a_waiting_step_is_never_due_nor_waiting_for_a_worker(sessions, writer, write: Write) -> None:
    """A Waiting step's CompleteBy (its deadline) may pass: the Supervisor's scan and the queue
    check leave it alone (the workflow's own timer acts on the deadline)."""
    task_id = fresh_id("wait")
    await writer.accept(accepted(task_id))
    await write(
        transition(task_id, 1, StepState.WAITING, complete_by=NOW, note="until noon", task_state=TaskState.PROCESSING)
    )
    later = NOW + timedelta(days=30)
    async with sessions() as session:
        assert [s.task_id for s, _ in await due_steps(session, later, timedelta(0), 100)] == []
        assert await waiting_tasks_by_queue(session, later) == {"q": 1}  # its charge step is Pending
    await write(transition(task_id, 2, StepState.WAITING, complete_by=NOW).model_copy(update={"step": "charge"}))
    async with sessions() as session:
        assert await waiting_tasks_by_queue(session, later) == {}


async def test_the_supervisors_claim_never_lowers_failure_count(sessions, writer) -> None:
    task_id = fresh_id("claim")
    await writer.accept(accepted(task_id))
    failed = transition(task_id, 1, StepState.FAILED, failure_count=3)
    async with sessions() as session:
        await record_transitions(session, [failed])
    look = NOW + timedelta(minutes=1)
    async with sessions() as session, session.begin():
        assert not await mirror.claim_step(session, task_id, "reserve", 3, failed.version, 2, look)
        assert await mirror.claim_step(session, task_id, "reserve", 3, failed.version, 4, look)
        assert not await mirror.claim_step(session, task_id, "reserve", 3, failed.version, 5, look)  # as read: no more
    row = await reserve(sessions, task_id)
    assert (row.failure_count, row.complete_by, row.version) == (4, look, failed.version)


async def test_an_operators_mark_is_a_compare_and_set_that_keeps_the_version(sessions, writer) -> None:
    task_id = fresh_id("mark")
    await writer.accept(accepted(task_id))
    running = transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED, task_state=TaskState.PROCESSING)
    await writer.write(running)
    async with sessions() as session, session.begin():
        assert await mirror.mark_step(
            session, task_id, "reserve", ("Processing", running.version), "Error", "Error", NOW
        )
        assert not await mirror.mark_step(
            session, task_id, "reserve", ("Processing", running.version), "Error", "Error", NOW
        )
    row = await reserve(sessions, task_id)
    assert (row.state, row.version, await task_state(sessions, task_id)) == ("Error", running.version, "Error")
    await writer.write(transition(task_id, 2, StepState.PROCESSED, 1, Phase.AGENT_DONE))  # the workflow's next wins
    assert (await reserve(sessions, task_id)).state == "Processed"


async def test_a_repair_of_a_finished_workflow_outranks_its_late_writes(sessions, writer) -> None:
    """Reconciliation writes what Temporal shows over the row it read; a write of the finished
    run that arrives later (older than the repair) does not undo it."""
    task_id = fresh_id("repair")
    await writer.accept(accepted(task_id))
    now = datetime.now(UTC)
    version = mirror.repair_version(0, now, finished=True)
    async with sessions() as session, session.begin():
        assert await mirror.repair_step(
            session, task_id, "reserve", 0, version, "Processed", now, failure_count=2, result={"id": "r1"}
        )
        assert not await mirror.repair_step(session, task_id, "reserve", 0, version + 1, "Processed", now)
    late = int((now - timedelta(seconds=5)).timestamp() * 1000)
    stale = transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED, locked_by="w")
    await writer.write(stale.model_copy(update={"version": version_of(late, 1, Phase.AGENT_STARTED)}))
    row = await reserve(sessions, task_id)
    assert (row.state, row.failure_count, row.result, row.version) == ("Processed", 2, {"id": "r1"}, version)
    assert mirror.repair_version(7, now, finished=False) == 8  # a running workflow's next write must win


async def test_a_finished_task_with_an_open_step_is_found_from_the_index(sessions, writer) -> None:
    """The page the Supervisor reads of finished tasks: the one whose charge write was lost
    (Pending while its task says Processed) disagrees; the one fully written does not."""
    whole, lost = fresh_id("whole"), fresh_id("lost")
    for task_id in (whole, lost):
        await writer.accept(accepted(task_id))
        await writer.write(transition(task_id, 1, StepState.PROCESSED, 1, Phase.AGENT_DONE))
    charge = transition(whole, 2, StepState.PROCESSED, 1, Phase.AGENT_DONE, task_state=TaskState.PROCESSED)
    await writer.write(charge.model_copy(update={"step": "charge"}))
    # The lost task's charge never got written; its task row was (as the last step's write does).
    await writer.write(transition(lost, 2, StepState.PROCESSED, 1, Phase.AGENT_DONE, task_state=TaskState.PROCESSED))
    start, end = (NOW - timedelta(days=1), ""), NOW + timedelta(days=1)
    async with sessions() as session:
        page = await finished_page(session, "Processed", start, end, 10)
        first = await finished_page(session, "Processed", start, end, 1)
    assert [task_id for _, task_id in page.disagreeing] == [lost]
    assert page.last is not None and not page.full
    assert first.full and first.last is not None


async def test_a_compensated_task_with_a_step_still_processed_disagrees(sessions, writer) -> None:
    """Under a Compensated task a step row still Processed disagrees (its undo's writes were
    lost); one whose steps were all undone does not. Under a Processed task, Processed agrees."""
    undone, lost = fresh_id("undone"), fresh_id("lostundo")
    for task_id in (undone, lost):
        await writer.accept(accepted(task_id))
        await writer.write(transition(task_id, 1, StepState.PROCESSED, 1, Phase.AGENT_DONE))
    await writer.write(transition(undone, 2, StepState.COMPENSATED, 1, Phase.AGENT_DONE))
    for task_id in (undone, lost):
        charge = transition(task_id, 3, StepState.SKIPPED, task_state=TaskState.COMPENSATED)
        await writer.write(charge.model_copy(update={"step": "charge"}))
    start, end = (NOW - timedelta(days=1), ""), NOW + timedelta(days=1)
    async with sessions() as session:
        compensated = await finished_page(session, "Compensated", start, end, 10)
        processed = await finished_page(session, "Processed", start, end, 10)
    assert [task_id for _, task_id in compensated.disagreeing] == [lost]
    assert processed.disagreeing == [] and processed.last is None


async def one_refused_one_failing(sessions: async_sessionmaker[AsyncSession], writer: StepWriter) -> tuple[str, str]:
    """Two tasks whose reserve is Failed and due: one refused for good, one failing for now."""
    refused, failing = fresh_id("refused"), fresh_id("failing")
    for task_id, permanent in ((refused, True), (failing, False)):
        await writer.accept(accepted(task_id))
        async with sessions() as session:
            await record_transitions(
                session,
                [transition(task_id, 1, StepState.FAILED, failure_count=1, permanent=permanent, complete_by=NOW)],
            )
    return refused, failing


async def test_a_look_for_refusals_finds_only_the_steps_refused_for_good(sessions, writer) -> None:
    """The Supervisor's look between the chunks of a sweep: the due steps refused for good, and
    not the ones failing for now (which the sweep's own scan finds)."""
    refused, failing = await one_refused_one_failing(sessions, writer)
    later = NOW + timedelta(days=30)
    ours = {refused, failing}
    async with sessions() as session:
        every = await due_steps(session, later, timedelta(0), 1000)
        refusals = await due_steps(session, later, timedelta(0), 1000, refusals_only=True)
    assert {s.task_id for s, _ in every} & ours == ours
    assert {s.task_id for s, _ in refusals} & ours == {refused}
    assert all(s.permanent for s, _ in refusals)


async def test_the_scan_between_chunks_reads_refusals_and_nothing_else(sessions, writer, db_url: str) -> None:
    """``supervisor.scan`` with ``refusals_only``: the due steps refused for good, not the ones
    failing for now (which the full scan finds too), with the policy and its chunk size."""
    refused, failing = await one_refused_one_failing(sessions, writer)
    settings = Settings(
        _env_file=None, database=DatabaseSettings(url=db_url), supervisor=SupervisorSettings(batch_size=1000)
    )  # type: ignore[call-arg]
    scan = ScanActivities(sessions, settings)
    found = await ActivityEnvironment().run(scan.scan, ScanInput(refusals_only=True))
    assert refused in {s.task_id for s in found.due} and failing not in {s.task_id for s in found.due}
    assert all(s.permanent for s in found.due)
    assert found.policy.apply_chunk == 2 * settings.supervisor.concurrency
    whole = await ActivityEnvironment().run(scan.scan, ScanInput())
    assert {refused, failing} <= {s.task_id for s in whole.due}


async def test_a_write_put_behind_has_landed_once_the_writer_is_closed(sessions, writer: StepWriter) -> None:
    """What an Agent does not wait for (a forward step's Processed row) is still written before
    its worker's writer closes: a worker stopping does not drop what it has already answered."""
    import asyncio

    task_id = fresh_id("behind")
    await writer.accept(accepted(task_id))
    allowed = asyncio.Event()

    async def after_a_while() -> None:
        await allowed.wait()  # still on its way when the writer is asked to close
        await writer.write(transition(task_id, 5, StepState.PROCESSED, 1, Phase.AGENT_DONE))

    writer.behind(after_a_while())
    closing = asyncio.ensure_future(writer.aclose())
    await asyncio.sleep(0)
    assert not closing.done()
    allowed.set()
    await asyncio.wait_for(closing, timeout=30)
    assert (await reserve(sessions, task_id)).state == "Processed"
