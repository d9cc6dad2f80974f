"""The kit against the demo services with faults on - a seeded mix of 20 % transient answers,
10 % lost answers (the effect done, the answer a 500) and 30 % slow ones on every endpoint - as
``check_service`` and as ``sas check-service``: it asks again where sas's Agent would (the same
request under the same key), so each service is judged on its promises and conforms; asked
once (``max_attempts=1``), the same mix leaves clauses unjudged, which shows the faults fired."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sas.api import StepPolicyValues
from sas.api.contract import Verdict, assert_conforms, builtin_services_slowdown, check_service
from sas.conformance.target import KEY_PREFIX
from sas_demo_services import ServiceProcess, free_port, start_service_process
from tests.conformance.test_builtin_services import CALLS, REFUSING
from tests.conformance.test_check_service_cli import CLAUSES, sas

SEED = 20_270_501
MIX = [
    {"kind": "transient", "probability": 0.2},
    {"kind": "lost_response", "probability": 0.1},
    {"kind": "latency", "probability": 0.3, "latency_ms": 40},
]


@pytest.fixture
def chaos(tmp_path: Path) -> Iterator[ServiceProcess]:
    """The demo services with the mix on every endpoint, for the kit's keys (the orders it makes
    up). A process of each test's own, seeded: the kit's requests come in the same order each
    run, so they meet the same dice, whichever tests ran before on the worker."""
    with start_service_process(
        free_port(), str(tmp_path / "ledger.db"), fault_seed=SEED, log_path=str(tmp_path / "services.log")
    ) as process:
        for rule in MIX:
            added = httpx.post(
                f"{process.url}/admin/faults",
                json={"endpoint": "*", "match_order_prefix": KEY_PREFIX, **rule},
                headers=process.admin_headers,
            )
            assert added.status_code == 201, added.text
        yield process


def fired(process: ServiceProcess) -> dict[str, int]:
    """How many calls each rule of the mix hit."""
    rules = httpx.get(f"{process.url}/admin/faults", headers=process.admin_headers).json()["faults"]
    return {r["kind"]: r["hits"] for r in rules if r.get("match_order_prefix") == KEY_PREFIX}


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_each_demo_service_conforms_under_the_fault_mix(chaos: ServiceProcess, name: str) -> None:
    assert chaos.admin_token is not None
    report = await check_service(
        name,
        chaos.url,
        calls=CALLS[name],
        refusing=REFUSING[name],
        slow_forward=builtin_services_slowdown(chaos.admin_token),
    )
    assert_conforms(report)
    verdicts = {r.clause.value: r.verdict for r in report.results}
    expected = dict.fromkeys(verdicts, Verdict.PASS)
    if REFUSING[name] is None:
        expected["refusal"] = Verdict.NOT_EXERCISED
    assert verdicts == expected, report.lines()
    hit = fired(chaos)
    assert hit["transient"] + hit["lost_response"] > 0, f"no fault hit the check: {hit}"
    answers = next(r for r in report.results if r.clause.value == "answers")
    assert "asked again after a transient answer" in answers.detail, answers.detail


async def test_asked_once_the_same_mix_leaves_clauses_unjudged_never_failed(chaos: ServiceProcess) -> None:
    """Without the Agent's retries a transient answer ends its clause (not exercised): what the
    retries above spare. Even so, no clause fails on a transient answer: it breaks no promise."""
    once = StepPolicyValues(max_attempts=1)
    report = await check_service("payment", chaos.url, calls=CALLS["payment"], refusing=REFUSING["payment"], retry=once)
    assert_conforms(report)
    unjudged = [r.detail for r in report.results if r.verdict is Verdict.NOT_EXERCISED]
    assert any("stayed transient" in detail for detail in unjudged), report.lines()


def test_sas_check_service_runs_with_faults_on(chaos: ServiceProcess, tmp_path: Path) -> None:
    token = tmp_path / "admin-token"
    token.write_text(f"{chaos.admin_token}\n")
    done = sas(
        "payment",
        *("--url", chaos.url, "--forward", "/payment/charge", "--body-json", json.dumps(CALLS["payment"].body)),
        *("--undo", "/payment/refund", "--undo-body-json", json.dumps(CALLS["payment"].undo_body)),
        *("--refusing", json.dumps(REFUSING["payment"]), "--fault-token-file", str(token), "--json"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    verdicts = {r["clause"]: r["verdict"] for r in report["results"]}
    assert verdicts == dict.fromkeys(CLAUSES, "pass"), done.stdout
    answers = next(r for r in report["results"] if r["clause"] == "answers")
    assert "asked again after a transient answer" in answers["detail"], answers
    hit = fired(chaos)
    assert hit["transient"] + hit["lost_response"] > 0, f"no fault hit the check: {hit}"
