"""The kit pointed at a hostile service (tests/outbound/hostile.py) is safe: every request it
makes is capped in bytes (1 MiB for an answer it reads, nothing of the first ``GET /``'s body)
and in time (the check's timeout for the whole exchange, not per read), and an answer no reader
could parse is one clear report line, never "unexpected RecursionError"."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sas.api.contract import ExplicitCalls, ServiceCheckError, ServiceReport, SlowCall, Verdict, check_service
from sas.cli.check_service_cmd import MAX_JSON_CHARS, _json_object
from sas.cli.output import CliError
from sas.conformance import builtin_services_slowdown
from tests import cli_process
from tests.helpers import wait_until
from tests.outbound.hostile import Fixed, Flood, Hostile, Trickle, TrickleHead, hostile

TIMEOUT_S = 1.0
# Far more than the check's timeout on a loaded machine; far less than for ever.
SLACK_S = 15.0
NESTED = b"[" * 100_000 + b"]" * 100_000
GOOD = Fixed(b'{"widget_id": "wd_1"}')
FLOOD = 64 * 1024 * 1024


def calls(forward: str, lookup: str | None = None) -> ExplicitCalls:
    return ExplicitCalls(forward=forward, body={"colour": "red", "order": "{task_id}"}, lookup=lookup)


async def check(service: Hostile, forward: str, lookup: str | None = None) -> ServiceReport:
    """The check, which must end well within its bound."""
    checking = asyncio.ensure_future(
        check_service("widgets", service.url, calls=calls(forward, lookup), timeout_s=TIMEOUT_S, slow_s=0.5)
    )
    done, _ = await asyncio.wait([checking], timeout=SLACK_S)
    assert done, f"the check was still running {SLACK_S}s in, with a timeout of {TIMEOUT_S}s"
    return checking.result()


async def closed_by_the_kit(service: Hostile, path: str) -> None:
    async def open_now() -> int:
        return service.open_to(path)

    await wait_until(open_now, lambda n: n == 0, timeout=SLACK_S, interval=0.05, what=f"{path} closed by the kit")


@pytest.fixture
def trickling_head() -> Iterator[Hostile]:
    with hostile({"/": TrickleHead()}) as service:
        yield service


async def test_a_first_answer_whose_headers_trickle_is_one_line_within_the_timeout(trickling_head: Hostile) -> None:
    started = time.monotonic()
    checking = asyncio.ensure_future(
        check_service("widgets", trickling_head.url, calls=calls("/x/make"), timeout_s=TIMEOUT_S, slow_s=0.5)
    )
    done, _ = await asyncio.wait([checking], timeout=SLACK_S)
    assert done, f"GET / was still waiting {SLACK_S}s in, with a timeout of {TIMEOUT_S}s"
    with pytest.raises(ServiceCheckError) as failed:
        await checking
    assert f"GET / got no answer within {TIMEOUT_S:g} s" in str(failed.value) and not failed.value.bad_input
    assert time.monotonic() - started >= TIMEOUT_S - 0.2
    await closed_by_the_kit(trickling_head, "/")


@pytest.mark.parametrize(
    "first", [Trickle("chunked"), Trickle("length"), Flood(FLOOD)], ids=["chunked", "length", "flood"]
)
async def test_the_first_answer_s_body_is_never_read(first: Trickle | Flood) -> None:
    """Any status of ``GET /`` says the service is there: its body is not read at all, so a
    trickle cannot hold the check, nor a flood fill its memory."""
    with hostile({"/": first, "/good/make": GOOD}) as service:
        report = await check(service, "/good/make")
        await closed_by_the_kit(service, "/")
        (answered,) = service.to("/")
        assert not answered.finished and answered.written < FLOOD // 4
    assert report.results  # and the check went on to the clauses


async def test_a_trickled_business_answer_is_cut_off_at_the_timeout() -> None:
    with hostile({"/": GOOD, "/slow/make": Trickle(), "/slow/lookup": Trickle("length")}) as service:
        report = await check(service, "/slow/make", "/slow/lookup")
        assert service.to("/slow/make")  # it was asked, and hung up on
        await closed_by_the_kit(service, "/slow/make")
        await closed_by_the_kit(service, "/slow/lookup")
    replay = next(r for r in report.results if r.clause.value == "replay")
    assert replay.verdict != Verdict.PASS and f"did not answer in whole within {TIMEOUT_S:.1f} s" in replay.detail


async def test_an_answer_nested_too_deep_is_a_failed_clause_not_a_crash() -> None:
    with hostile({"/": GOOD, "/deep/make": Fixed(NESTED)}) as service:
        report = await check(service, "/deep/make")
    answers = next(r for r in report.results if r.clause.value == "answers")
    assert answers.verdict == Verdict.FAIL, report.lines()
    assert "nested deeper than 64 levels" in answers.detail and "not a JSON object" in answers.detail


def test_sas_check_service_reports_a_nested_answer_in_one_line() -> None:
    with hostile({"/": GOOD, "/deep/make": Fixed(NESTED)}) as service:
        done = cli_process.run(
            [
                *(sys.executable, "-m", "sas.cli.main", "check-service", "widgets", "--url", service.url),
                *("--forward", "/deep/make", "--body-json", '{"colour": "red"}', "--no-lookup"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},  # the line whole
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unexpected" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL") and "answers" in line]
    assert failed and "nested deeper than 64 levels" in failed[0], done.stdout


@pytest.mark.parametrize("plan", [Trickle(), Trickle("length"), Flood(FLOOD)], ids=["chunked", "length", "flood"])
async def test_the_demo_services_slowdown_hook_is_capped_too(plan: Trickle | Flood) -> None:
    """The in-flight clause's hook asks the service under test (its fault API): that answer is
    read within the hook's timeout and up to 64 KiB."""
    with hostile({"/admin/faults": plan}) as service:
        slow = builtin_services_slowdown("token", timeout_s=TIMEOUT_S)
        call = SlowCall(service.url, "widgets", "widgets.make", "/x/make", "t", "t:make", {}, 1.0)
        hooking = asyncio.ensure_future(slow(call))
        done, _ = await asyncio.wait([hooking], timeout=SLACK_S)
        assert done, f"the slowdown hook was still waiting {SLACK_S}s in, with a timeout of {TIMEOUT_S}s"
        with pytest.raises(ServiceCheckError) as failed:
            await hooking
        assert "POST /admin/faults: no answer" in str(failed.value)
        await closed_by_the_kit(service, "/admin/faults")
        assert not service.to("/admin/faults")[0].finished


def test_a_body_file_of_escaped_quotes_never_closed_is_refused_at_once(tmp_path: Path) -> None:
    """Every quote of it once began a string the depth check scanned to the end: about 15 s for
    the 64 KiB a --body-json may be, with the event loop's thread held."""
    body = tmp_path / "body.json"
    body.write_text('{"colour": "' + '\\"' * ((MAX_JSON_CHARS - 20) // 2))
    started = time.monotonic()
    with pytest.raises(CliError) as refused:
        _json_object("--body-json", f"@{body}")
    assert "--body-json is not JSON: Unterminated string" in str(refused.value)
    assert time.monotonic() - started < 5.0
