"""Every call out has one overall deadline (activities/remote.py): sending and reading the whole
answer end by the attempt's complete-by plus ANSWER_GRACE_S, and the connection is closed then.
httpx's own timeouts are per read, which a service that trickles its answer never trips: such a
call would hold its worker slot, its service's bulkhead slot and a connection for ever, and a
cancelled attempt, which waits for the answer of a request it sent, would never end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from sas.activities.remote import ANSWER_GRACE_S, RemoteCaller
from sas.activities.remote_answers import TRANSIENT
from tests.helpers import wait_until
from tests.outbound.hostile import Hostile, Trickle, hostile

COMPLETE_BY_S = 1.5
# Far more than complete-by and its grace on a loaded machine; far less than for ever.
SLACK_S = 10.0


@pytest.fixture(scope="module")
def trickling() -> Iterator[Hostile]:
    plans = {
        "/chunked/book": Trickle("chunked"),
        "/length/book": Trickle("length"),
        "/chunked/lookup": Trickle("chunked"),
        "/length/lookup": Trickle("length"),
    }
    with hostile(plans) as service:
        yield service


def _complete_by() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=COMPLETE_BY_S)


Call = Callable[[RemoteCaller, str, datetime], Awaitable[dict[str, Any]]]


async def _post(caller: RemoteCaller, framing: str, complete_by: datetime) -> dict[str, Any]:
    return await caller.post(f"/{framing}/book", {"x": 1}, f"trickle-{framing}:book", complete_by)


async def _get(caller: RemoteCaller, framing: str, complete_by: datetime) -> dict[str, Any]:
    return await caller.get(f"/{framing}/lookup", {"idempotency_key": f"trickle-{framing}:book"}, complete_by)


CALLS = [pytest.param(_post, "book", id="post"), pytest.param(_get, "lookup", id="lookup")]
FRAMINGS = ["chunked", "length"]


async def _closed(service: Hostile, path: str) -> None:
    async def open_now() -> int:
        return service.open_to(path)

    await wait_until(open_now, lambda n: n == 0, timeout=SLACK_S, interval=0.05, what=f"{path} closed by sas")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(("call", "action"), CALLS)
async def test_a_trickled_answer_is_cut_off_at_complete_by_as_transient_and_its_connection_closed(
    trickling: Hostile, framing: str, call: Call, action: str
) -> None:
    path = f"/{framing}/{action}"
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(client, trickling.url)
        started = time.monotonic()
        calling = asyncio.ensure_future(call(caller, framing, _complete_by()))
        done, _ = await asyncio.wait([calling], timeout=COMPLETE_BY_S + ANSWER_GRACE_S + SLACK_S)
        assert done, f"still waiting for a trickled answer {SLACK_S}s past complete-by and its grace"
        with pytest.raises(ApplicationError) as failed:
            await calling
        ended = time.monotonic() - started
        # A lost answer, as when a service falls silent: retryable, and counted against the service.
        assert failed.value.type == TRANSIENT and not failed.value.non_retryable
        assert "did not answer before complete-by" in failed.value.message
        assert ended >= COMPLETE_BY_S - 0.2  # not cut short: the service had its time
        await _closed(trickling, path)  # and the service saw sas hang up, not keep the connection


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_cancelled_attempt_waits_for_a_trickled_answer_only_until_complete_by(
    trickling: Hostile, framing: str
) -> None:
    """A cancelled attempt waits for the answer of what it sent (the undo is decided on what the
    service did), but no longer than the call's deadline: then it ends, cancelled."""
    path = f"/{framing}/book"
    before = len(trickling.to(path))
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(client, trickling.url)
        calling = asyncio.ensure_future(_post(caller, framing, _complete_by()))

        async def at_the_service() -> int:
            return len(trickling.to(path))

        await wait_until(at_the_service, lambda n: n > before, timeout=SLACK_S, interval=0.01, what="the request sent")
        calling.cancel()
        done, _ = await asyncio.wait([calling], timeout=COMPLETE_BY_S + ANSWER_GRACE_S + SLACK_S)
        assert done, "a cancelled attempt still waiting for a trickled answer long past complete-by"
        with pytest.raises(asyncio.CancelledError):
            await calling
        await _closed(trickling, path)


async def test_the_bulkhead_slot_of_a_trickled_call_is_free_again(trickling: Hostile) -> None:
    """With one slot, the next call to the service goes out once the trickled one is cut off."""
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(client, trickling.url, max_concurrency=1)
        first = asyncio.ensure_future(_post(caller, "chunked", _complete_by()))
        # Time enough to wait for the first to be cut off, then to be sent itself.
        second_by = datetime.now(UTC) + timedelta(seconds=2 * COMPLETE_BY_S + 2 * ANSWER_GRACE_S)
        second = asyncio.ensure_future(_get(caller, "length", second_by))
        done, _ = await asyncio.wait([first, second], timeout=2 * (COMPLETE_BY_S + ANSWER_GRACE_S) + SLACK_S)
        assert first in done and second in done, "the trickled call kept the service's one slot"
        for calling in (first, second):
            with pytest.raises(ApplicationError) as failed:
                await calling
            # The second was sent, and cut off in its turn: not refused for want of a slot.
            assert "did not answer before complete-by" in failed.value.message
