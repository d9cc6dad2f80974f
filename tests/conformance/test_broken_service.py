"""The kit against a service that meets the contract, and against the same service broken in
one way at a time (tests/conformance/widgets.py): each breakage fails the clause it breaks,
by name, and ``assert_conforms`` says which."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sas.api.contract import ExplicitCalls, ServiceReport, SlowCall, Verdict, assert_conforms, check_service
from tests.conformance.serving import serving
from tests.conformance.widgets import REFUSED_COLOUR, Widgets, create_app

State = dict[str, Widgets]


@pytest.fixture(scope="module")
def widgets() -> Iterator[tuple[str, State]]:
    app, state = create_app()
    with serving(app) as url:
        yield url, state


def calls(mode: str) -> ExplicitCalls:
    return ExplicitCalls(
        forward=f"/{mode}/make",
        body={"colour": "red", "order": "{task_id}"},
        undo=f"/{mode}/unmake",
        undo_body={"make_key": "{forward_key}", "widget_id": "{forward.widget_id}"},
        lookup=f"/{mode}/lookup",
    )


async def check(url: str, mode: str) -> ServiceReport:
    async def slow(call: SlowCall) -> None:
        async with httpx.AsyncClient() as http:
            await http.post(f"{call.url}/{mode}/slow", json={"key": call.key, "seconds": call.seconds})

    return await check_service(
        "widgets", url, calls=calls(mode), refusing={"colour": REFUSED_COLOUR}, slow_forward=slow, slow_s=1.0
    )


def verdicts(report: ServiceReport) -> dict[str, Verdict]:
    return {r.clause.value: r.verdict for r in report.results}


async def test_a_service_that_meets_the_contract_passes_every_clause(widgets: tuple[str, State]) -> None:
    url, state = widgets
    report = await check(url, "good")
    assert verdicts(report) == dict.fromkeys(verdicts(report), Verdict.PASS), report.lines()
    assert len(report.results) == 8
    assert_conforms(report)
    # Only keys made up for the check were used.
    assert state["good"].effects and all(k.startswith("sas-check-") for k in state["good"].effects)


@pytest.mark.parametrize(
    ("mode", "broken"),
    [
        ("new-effect-on-replay", "replay"),
        ("html-success", "answers"),
        ("refusal-not-json", "refusal"),
        ("lookup-does-not-void", "lookup-nothing"),
        ("undo-does-not-void", "undo-first"),
        ("undo-refuses-nothing", "undo-nothing"),
        ("lookup-ignores-in-flight", "in-flight"),
    ],
)
async def test_a_broken_service_fails_the_clause_it_breaks(widgets: tuple[str, State], mode: str, broken: str) -> None:
    url, _ = widgets
    report = await check(url, mode)
    assert verdicts(report)[broken] is Verdict.FAIL, report.lines()
    with pytest.raises(AssertionError, match=f"widgets.make {broken}: "):
        assert_conforms(report)


async def test_an_effect_after_nothing_is_named_as_such(widgets: tuple[str, State]) -> None:
    url, state = widgets
    report = await check(url, "lookup-ignores-in-flight")
    failed = next(r for r in report.results if r.clause.value == "in-flight")
    assert "answered nothing while the forward was served, and it took effect" in failed.detail
    assert len(state["lookup-ignores-in-flight"].effects) > 0


async def test_without_a_refused_body_or_a_slowdown_those_clauses_are_not_exercised(
    widgets: tuple[str, State],
) -> None:
    url, _ = widgets
    report = await check_service("widgets", url, calls=calls("good"))
    assert verdicts(report)["refusal"] is Verdict.NOT_EXERCISED
    assert verdicts(report)["in-flight"] is Verdict.NOT_EXERCISED
    assert report.ok  # not exercised is no failure
    assert [r.clause.value for r in report.results if r.verdict is Verdict.PASS] == [
        "replay",
        "answers",
        "lookup-done",
        "lookup-nothing",
        "undo-first",
        "undo-nothing",
    ]
