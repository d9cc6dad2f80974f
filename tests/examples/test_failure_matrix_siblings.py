"""The failure matrix's parallel-group cases on the trip's ``(flight ‖ hotel) → charge``: one
sibling refused before, during or after the other's call, both refused at once; and those
cases shown to catch a Scheduler, or a service, that leaves a cut-off sibling's effect."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api.testing import FakeAgents, MatrixCase, check_failure_matrix, failure_matrix, time_skipping_environment
from sas.api.testing import _matrix_runner as matrix_module
from sas_trip.workflows import TripWorkflow
from tests.examples.broken_undo import ForgetsCutOffAttemptsTripWorkflow
from tests.examples.test_failure_matrix import BOOKED, TRIP
from tests.examples.three_way import OutingWorkflow, UndoesCutOffLastOutingWorkflow

SIBLING_CASES = [
    "flight refused before hotel's call",
    "flight refused during hotel's call",
    "flight refused after hotel's call",
    "hotel refused before flight's call",
    "hotel refused during flight's call",
    "hotel refused after flight's call",
    "flight and hotel refused at once",
]


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def by_name(cases: list[MatrixCase]) -> dict[str, MatrixCase]:
    return {c.name: c for c in cases}


def problems(cases: list[MatrixCase]) -> dict[str, list[str]]:
    return {c.name: c.problems for c in cases if c.problems}


async def test_each_sibling_refused_before_during_and_after_the_other_and_both_at_once(
    env: WorkflowEnvironment,
) -> None:
    cases = by_name(await check_failure_matrix(env, TripWorkflow, TRIP, answers=BOOKED))
    assert [n for n in cases if n in SIBLING_CASES] == SIBLING_CASES
    # Before: the hotel's call never left; its undo found nothing done (and voided the key).
    before = cases["flight refused before hotel's call"]
    assert (before.outcome, before.done, before.undone, before.cut_off) == ("Compensated", [], [], [])
    # During: the hotel's call was at the service when the flight was refused; it landed as the
    # Scheduler cancelled it, and was undone.
    during = cases["flight refused during hotel's call"]
    assert (during.done, during.cut_off, during.undone) == (["hotels.book"], ["hotels.book"], ["hotels.cancel"])
    # After: the hotel was booked, and seen booked, before the refusal.
    after = cases["flight refused after hotel's call"]
    assert (after.done, after.cut_off, after.undone) == (["hotels.book"], [], ["hotels.cancel"])
    at_once = cases["flight and hotel refused at once"]
    assert (at_once.outcome, at_once.done, at_once.undone) == ("Compensated", [], [])
    # The charge, after the group, is never called in any of them.
    assert all("cards.charge" not in cases[n].done for n in SIBLING_CASES)


async def test_a_scheduler_that_forgets_cut_off_attempts_fails_the_cases_naming_them(
    env: WorkflowEnvironment,
) -> None:
    cases = await failure_matrix(env, ForgetsCutOffAttemptsTripWorkflow, TRIP, answers=BOOKED)
    broken = problems(cases)
    assert broken["hotel refused during flight's call"] == ["flight undone 0 times"]
    assert broken["flight refused during hotel's call"] == ["hotel undone 0 times"]
    # Cut off before its call left: no effect, but nobody asked its service, so nothing proves it.
    assert broken["hotel refused before flight's call"] == [
        "flight attempted, but neither undone nor found to have done nothing"
    ]
    assert "hotel refused after flight's call" not in broken
    with pytest.raises(AssertionError, match=r"trip: .*hotel refused during flight's call: flight undone 0 times"):
        await check_failure_matrix(env, ForgetsCutOffAttemptsTripWorkflow, TRIP, answers=BOOKED)


class LookupForgetsCutOffCalls(FakeAgents):
    """A service whose lookup knows only the calls whose caller got the answer: a call cut off
    at the service lands, but its lookup says nothing was done."""

    def had_effect(self, key: str) -> bool:
        return super().had_effect(key) and key not in {k for _, k in self.cut_off}


async def test_a_service_that_forgets_a_cut_off_call_fails_the_during_cases(
    env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matrix_module, "FakeAgents", LookupForgetsCutOffCalls)
    broken = problems(await failure_matrix(env, TripWorkflow, TRIP, answers=BOOKED))
    assert broken == {
        "flight refused during hotel's call": ["hotel undone 0 times"],
        "hotel refused during flight's call": ["flight undone 0 times"],
    }


async def test_a_group_of_three_times_each_pair_while_the_third_completes_first(env: WorkflowEnvironment) -> None:
    cases = by_name(await check_failure_matrix(env, OutingWorkflow, {"who": "Ada"}))
    timed = [n for n in cases if " refused before " in n or " refused during " in n or " refused after " in n]
    assert len(timed) == 3 * 2 * 3
    assert [n for n in cases if n.endswith("at once")] == [
        "ticket and table refused at once",
        "ticket and taxi refused at once",
        "table and taxi refused at once",
    ]
    during = cases["ticket refused during table's call"]
    assert (during.cut_off, sorted(during.done)) == (["table.book"], ["table.book", "taxi.book"])
    assert sorted(during.undone) == ["table.cancel", "taxi.cancel"]
    at_once = cases["ticket and table refused at once"]
    assert (at_once.done, at_once.undone) == (["taxi.book"], ["taxi.cancel"])


async def test_a_scheduler_that_undoes_a_cut_off_call_last_fails_naming_the_case(env: WorkflowEnvironment) -> None:
    broken = problems(await failure_matrix(env, UndoesCutOffLastOutingWorkflow, {"who": "Ada"}))
    assert broken["ticket refused during table's call"] == ["table was cut off in flight, but undone after ['taxi']"]
    assert {name: said for name, said in broken.items() if "during" not in name} == {}
