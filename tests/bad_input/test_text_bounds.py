"""The one helper that bounds what services and signals say (task_models/text.py), and the
Agent's use of it on a service's error: cut to MAX_ERROR_TEXT bytes of Temporal's escaped JSON,
with the full text (up to MAX_FULL_ERROR_TEXT) kept in the failure's details."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.exceptions import ApplicationError

from sas.activities.remote_answers import REJECTED, TRANSIENT, read_answer
from sas.state_store.agent_writes.writer import WritesBehind
from sas.task_models import StepState, StepTransition
from sas.task_models.text import MAX_ERROR_TEXT, MAX_FULL_ERROR_TEXT, bounded, json_size


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=3000), limit=st.integers(min_value=200, max_value=4000))
def test_bounded_fits_keeps_the_start_and_says_what_it_cut(text: str, limit: int) -> None:
    cut = bounded(text, limit)
    assert json_size(cut) <= limit and len(cut.encode()) <= limit
    if json_size(text) <= limit:
        assert cut == text
    else:
        kept, _, marker = cut.rpartition("... [")
        assert text.startswith(kept) and marker == f"{len(text) - len(kept)} more characters cut]"


@pytest.mark.parametrize("char", ["é", "😀", "\x00", '"', "a"])
def test_a_huge_text_of_any_character_is_cut_to_the_bound(char: str) -> None:
    assert json_size(bounded(char * 1_000_000, MAX_ERROR_TEXT, cut_note="; see there")) <= MAX_ERROR_TEXT


def answer(status: int, message: str) -> httpx.Response:
    return httpx.Response(
        status,
        json={"error": "x" * 5000, "message": message},
        request=httpx.Request("POST", "http://svc/payment/charge"),
    )


@pytest.mark.parametrize("status, kind", [(422, REJECTED), (503, TRANSIENT)])
def test_a_huge_error_answer_is_cut_and_its_full_text_kept_in_the_details(status: int, kind: str) -> None:
    said = "é" * 450_000
    with pytest.raises(ApplicationError) as caught:
        read_answer("/payment/charge", answer(status, said))
    err = caught.value
    assert err.type == kind and json_size(err.message) <= MAX_ERROR_TEXT
    assert err.message.startswith("/payment/charge ") and "full_message" in err.message
    full = err.details[0]["full_message"]
    assert json_size(full) <= MAX_FULL_ERROR_TEXT and said.startswith(full.partition("... [")[0])
    if kind == REJECTED:
        assert err.details[0]["status"] == status and len(err.details[0]["error"]) <= 100


def test_a_short_error_answer_is_kept_whole_without_extra_details() -> None:
    with pytest.raises(ApplicationError) as caught:
        read_answer("/payment/charge", answer(503, "busy"))
    assert caught.value.message == "/payment/charge answered 503: busy" and not caught.value.details


def test_the_state_store_never_gets_more_than_the_bound() -> None:
    from datetime import UTC, datetime

    written = StepTransition(
        task_id="t", step="s", version=1, state="Failed", at=datetime.now(UTC), last_error="é\x00" * 100_000
    )
    assert written.last_error is not None and json_size(written.last_error) <= MAX_ERROR_TEXT
    assert "\x00" not in written.last_error


class _Writer(WritesBehind):
    """Keeps the Agent's writes (the state store, for this test)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[StepTransition] = []

    async def write(self, transition: StepTransition) -> None:
        self.written.append(transition)

    async def aclose(self) -> None:
        await self._settle()


@pytest.mark.parametrize("char", ["é", "a"])
async def test_a_result_too_large_for_the_tasks_status_is_garbage(char: str) -> None:
    """A service's answer within the 1 MiB an answer may be, but whose result would weigh more
    than MAX_RESULT_BYTES in the task's history and status: garbage, retried, never kept."""
    from temporalio.testing import ActivityEnvironment

    from sas.activities.agent import Agent
    from sas.activities.remote_answers import GARBAGE
    from sas.task_models import MirrorStamp, StepCall
    from sas.task_models.results import MAX_RESULT_BYTES

    writer = _Writer()
    agent = Agent(None, writer, "test", None)  # type: ignore[arg-type]
    call = StepCall(
        task_id="t-1", task_type="order", step="charge", position=1, idempotency_key="t-1:charge",
        payload={}, stamp=MirrorStamp(seq=1),
    )  # fmt: skip
    big = {"note": char * (MAX_RESULT_BYTES // 6 + 10 if char == "é" else MAX_RESULT_BYTES + 10)}
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(agent._finish, call, big, None)
    assert refused.value.type == GARBAGE and "more than the 65,536 a step's result may be" in refused.value.message
    assert writer.written == []
    small = {"note": char * 100}
    assert (await ActivityEnvironment().run(agent._finish, call, small, None)).data == small
    await writer.aclose()
    assert [t.state for t in writer.written] == [StepState.PROCESSED]  # written behind its answer
