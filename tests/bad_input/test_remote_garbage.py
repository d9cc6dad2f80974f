"""A remote service answering garbage or the wrong content type.

The Agent classifies every answer (activities/remote_answers.py): a JSON object is data, a 4xx
JSON error is a permanent refusal, and anything else - HTML, broken JSON, a JSON array,
the wrong content type, JSON nested deeper than MAX_JSON_DEPTH, a body its Content-Encoding
does not decode - is RemoteGarbage, retryable, and counts against the service's breaker. End
to end: garbage for a couple of calls still completes the order with one effect; permanent
garbage ends the step Failed, and the Supervisor retries it up to its threshold, then
compensates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.exceptions import ApplicationError

from sas import state_store
from sas.activities.remote import RemoteCaller
from sas.activities.remote_answers import GARBAGE, REJECTED, TRANSIENT, VOIDED, nothing_done, read_answer
from sas.breaker.service import ServiceBreaker
from sas.settings import BreakerSettings, DatabaseSettings
from sas.task_models import TaskState, TaskStatus
from tests.helpers import fresh_id
from tests.outbound.hostile import Fixed, Hostile, Plan, hostile
from tests.stack import Stack

CONTENT_TYPES = st.sampled_from(
    [
        None,
        "application/json",
        "application/json; charset=utf-8",
        "text/html; charset=utf-8",
        "text/plain",
        "application/problem+json",
        "application/octet-stream",
        "application/xml",
        "",
    ]
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
BODIES = st.one_of(
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.text(max_size=200).map(str.encode),  # any text, HTML included
    st.just(b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    st.just(b'{"order_id": '),  # truncated JSON
    st.just(b""),
)
STATUSES = st.sampled_from([200, 201, 204, 301, 400, 402, 404, 408, 409, 415, 422, 425, 429, 500, 502, 503, 504])


def response(status: int, content_type: str | None, body: bytes) -> httpx.Response:
    headers = {} if content_type is None else {"content-type": content_type}
    return httpx.Response(status, headers=headers, content=body, request=httpx.Request("POST", "http://svc/x"))


@settings(max_examples=300, deadline=None)
@given(status=STATUSES, content_type=CONTENT_TYPES, body=BODIES)
def test_every_answer_is_data_or_a_classified_error(status: int, content_type: str | None, body: bytes) -> None:
    try:
        data = read_answer("/payment/charge", response(status, content_type, body))
    except ApplicationError as err:
        assert err.type in (TRANSIENT, GARBAGE, REJECTED, VOIDED), err
        # Retryable exactly when it may go better next time; the message says what came back.
        assert err.non_retryable == (err.type in (REJECTED, VOIDED))
        assert "/payment/charge" in err.message
        if status >= 500 or status in (408, 425, 429):
            assert err.type == TRANSIENT
        elif err.type == GARBAGE:
            assert "not a JSON object" in err.message
        return
    # Only a 2xx/3xx JSON object is ever taken as the service's answer.
    assert status < 400 and isinstance(data, dict)
    assert "json" in (content_type or "") and json.loads(body) == data


@pytest.mark.parametrize("status, expected", [(200, GARBAGE), (503, TRANSIENT)])
def test_undecodable_json_body_is_classified(status: int, expected: str) -> None:
    with pytest.raises(ApplicationError) as caught:
        read_answer("/payment/charge", response(status, "application/json", b'{"id": "\xe9\x80"}'))
    assert caught.value.type == expected and not caught.value.non_retryable


# --- end to end -----------------------------------------------------------------------


def actions(ledger: list[dict[str, Any]]) -> list[str]:
    return [e["action"] for e in ledger]


async def no_failed_workflow_task(stack: Stack, task_id: str) -> None:
    history = await stack.client.get_workflow_handle(task_id).fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]


async def test_garbage_for_a_couple_of_calls_still_completes_with_one_effect(stack: Stack) -> None:
    task_id = fresh_id("garbage-twice")
    # Both of the Agent's quick attempts get HTML: the step Fails, the Supervisor retries it.
    await stack.add_fault(endpoint="payment.charge", kind="garbage", times=2, match_order_id=task_id)
    handle = await stack.submit(task_id)
    assert (await handle.result()).state == TaskState.PROCESSED
    assert actions(await stack.ledger(task_id)) == ["reserve", "charge", "ship"]
    status = await handle.query("status", result_type=TaskStatus)
    assert any("charge: Failed (RemoteGarbage)" in e and "text/html" in e for e in status.events), status.events
    assert [(d.kind, d.step) for d in await stack.decisions(task_id) if d.kind != "wait"] == [("retry", "charge")]
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Processed", "ship": "Processed"}
    await no_failed_workflow_task(stack, task_id)


async def test_permanent_garbage_fails_the_step_and_the_supervisor_compensates(stack: Stack) -> None:
    task_id = fresh_id("garbage-always")
    await stack.add_fault(endpoint="payment.charge", kind="garbage", match_order_id=task_id)
    handle = await stack.submit(task_id)
    result = await handle.result()
    assert result.state == TaskState.COMPENSATED
    charge = next(s for s in result.steps if s.name == "charge")
    assert (
        charge.error_type == "RemoteGarbage"
        and not charge.permanent
        and "not a JSON object" in (charge.last_error or "")
    )
    # Retried by the Supervisor below its threshold (after its "wait" decisions), compensated
    # at it; garbage never took effect.
    decisions = [(d.kind, d.failure_count) for d in await stack.decisions(task_id) if d.kind != "wait"]
    assert decisions == [("retry", 1), ("retry", 2), ("compensate", 3)]
    assert actions(await stack.ledger(task_id)) == ["reserve", "release"]
    assert await stack.step_states(task_id) == {"reserve": "Compensated", "charge": "Compensated", "ship": "Skipped"}
    assert await stack.task_state(task_id) == "Compensated"
    assert [a.kind for a in await stack.alerts(task_id)] == ["failure_threshold"]
    await no_failed_workflow_task(stack, task_id)


@pytest.mark.parametrize(
    "answer",
    [{}, {"amount_cents": 5}, {"charge_id": "", "amount_cents": 5}, {"charge_id": "ch 1", "amount_cents": 5}],
)
def test_an_answer_that_is_not_the_steps_result_model_is_garbage(answer: dict[str, Any]) -> None:
    """A JSON object without a valid charge id is no ChargeResult: RemoteGarbage, retryable."""
    from sas.activities.agent import _validated
    from sas_orders.models import ChargeResult

    with pytest.raises(ApplicationError) as caught:
        _validated(ChargeResult, "/payment/charge", answer | {"client_secret": "s3cr3t"})
    assert caught.value.type == GARBAGE and not caught.value.non_retryable
    assert "ChargeResult" in caught.value.message and "s3cr3t" not in caught.value.message
    ok = _validated(ChargeResult, "/payment/charge", {"charge_id": "ch_1", "amount_cents": 5, "extra": 1})
    assert ok == {"charge_id": "ch_1", "amount_cents": 5, "client_secret": None}


@pytest.mark.parametrize("status", [409, 425])
def test_a_lookup_answered_in_flight_is_asked_again_never_decided_on(status: int) -> None:
    """A request under the key is still being served: an undo must not read that as "nothing done"."""
    answer = response(status, "application/json", b'{"error": "in_flight", "message": "still booking"}')
    with pytest.raises(ApplicationError) as caught:
        read_answer("/flights/lookup", answer)
    assert caught.value.type == TRANSIENT and not caught.value.non_retryable
    assert not nothing_done(caught.value)


def test_a_lookup_answered_404_says_nothing_was_done() -> None:
    with pytest.raises(ApplicationError) as caught:
        read_answer("/flights/lookup", response(404, "application/json", b'{"error": "not_found"}'))
    assert nothing_done(caught.value)


# --- over real HTTP: every answer that is no answer is garbage, and the breaker hears of it ---

# 200 KB of one array in another: deeper than any reader's recursion limit.
NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture(scope="module")
def garbage_service() -> Iterator[Hostile]:
    plans: dict[str, Plan] = {
        "/deep/charge": Fixed(NESTED),
        "/deep-object/charge": Fixed(b'{"charge_id": ' + NESTED + b"}"),
        "/gzip/charge": Fixed(b"these bytes are not gzip", headers=(("Content-Encoding", "gzip"),)),
    }
    with hostile(plans) as service:
        yield service


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/deep/charge", "nested deeper than 64 levels"),
        ("/deep-object/charge", "nested deeper than 64 levels"),
        ("/gzip/charge", "does not decode"),
    ],
)
async def test_an_answer_nested_too_deep_or_undecodable_is_garbage_and_counts_against_the_service(
    garbage_service: Hostile, sqlite_url: str, path: str, said: str
) -> None:
    engine = state_store.create_engine(DatabaseSettings(url=sqlite_url))
    # Enabled (it counts calls) with a threshold out of reach: what it counted is all we read.
    breaker = ServiceBreaker(
        "payment", BreakerSettings(enabled=True, min_calls=1000), "w1", state_store.session_factory(engine)
    )
    try:
        async with httpx.AsyncClient() as client:
            caller = RemoteCaller(client, garbage_service.url, breaker=breaker, service="payment")
            complete_by = datetime.now(UTC) + timedelta(seconds=30)
            with pytest.raises(ApplicationError) as failed:
                await caller.post(path, {"amount_cents": 5}, "garbage-1:charge", complete_by)
    finally:
        await engine.dispose()
    assert failed.value.type == GARBAGE and not failed.value.non_retryable
    assert path in failed.value.message and said in failed.value.message
    assert breaker.counts() == (1, 1)  # one call, one failure of the service


def test_a_nested_answer_is_read_as_garbage_not_a_recursion_error() -> None:
    with pytest.raises(ApplicationError) as caught:
        read_answer("/payment/charge", response(200, "application/json", NESTED))
    assert caught.value.type == GARBAGE and "nested deeper than 64 levels" in caught.value.message
    with pytest.raises(ApplicationError) as caught:
        read_answer("/payment/charge", response(503, "application/json", NESTED))
    assert caught.value.type == TRANSIENT  # a 5xx is transient whatever its body
