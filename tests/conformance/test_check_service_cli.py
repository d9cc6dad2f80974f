"""``sas check-service`` as a team runs it: one line per clause within 80 columns, ``--json``,
exit 1 when a clause fails, and bad input as one line without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sas_demo_services import ServiceProcess, free_port, start_service_process
from tests import cli_process
from tests.conformance.serving import serving
from tests.conformance.widgets import REFUSED_COLOUR, Widgets, create_app
from tests.helpers import fresh_id

CLAUSES = ["replay", "answers", "refusal", "lookup-done", "lookup-nothing", "undo-first", "undo-nothing", "in-flight"]


@pytest.fixture(scope="module")
def widgets() -> Iterator[tuple[str, dict[str, Widgets]]]:
    app, state = create_app()
    with serving(app) as url:
        yield url, state


@pytest.fixture(scope="module")
def widgets_url(widgets: tuple[str, dict[str, Widgets]]) -> str:
    return widgets[0]


def sas(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_process.run(
        [sys.executable, "-m", "sas.cli.main", "check-service", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )


def widget_flags(url: str, mode: str) -> list[str]:
    return [
        "widgets",
        "--url",
        url,
        "--forward",
        f"/{mode}/make",
        "--body-json",
        '{"colour": "red", "order": "{task_id}"}',
        "--undo",
        f"/{mode}/unmake",
        "--undo-body-json",
        '{"make_key": "{forward_key}", "widget_id": "{forward.widget_id}"}',
        "--lookup",
        f"/{mode}/lookup",
        "--refusing",
        json.dumps({"colour": REFUSED_COLOUR}),
    ]


def clause_lines(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[0] in ("ok", "FAIL", "--") and parts[1] in CLAUSES:
            assert parts[1] not in found, f"{parts[1]} printed twice:\n{stdout}"
            found[parts[1]] = line
    return found


def test_one_line_per_clause_within_80_columns(widgets_url: str) -> None:
    done = sas(*widget_flags(widgets_url, "good"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    found = clause_lines(done.stdout)
    assert list(found) == CLAUSES
    assert found["in-flight"].startswith("--   in-flight      not exercised")  # nothing slows a widget
    assert all(found[c].startswith("ok ") for c in CLAUSES if c != "in-flight")
    assert lines[-1] == "widgets: 7 clauses pass, 0 fail, 1 not exercised"


def test_a_failed_clause_is_named_and_exits_1(widgets_url: str) -> None:
    done = sas(*widget_flags(widgets_url, "new-effect-on-replay"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert clause_lines(done.stdout)["replay"].startswith("FAIL replay         a repeat under one key answered 200")


def test_json_has_every_clause_and_the_verdict(widgets_url: str) -> None:
    done = sas(*widget_flags(widgets_url, "undo-does-not-void"), "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["service"] == "widgets"
    verdicts = {r["clause"]: r["verdict"] for r in report["results"]}
    assert list(verdicts) == CLAUSES
    assert verdicts["undo-first"] == "fail"
    assert verdicts["in-flight"] == "not exercised"
    failed = next(r for r in report["results"] if r["clause"] == "undo-first")
    assert failed["call"] == "widgets.make" and "took effect" in failed["detail"]


@pytest.fixture(scope="module")
def builtin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("conformance-cli")
    with start_service_process(free_port(), str(folder / "ledger.db"), enable_faults=True) as process:
        yield process


def test_the_fault_token_file_slows_a_built_in_service_s_forward(builtin: ServiceProcess, tmp_path: Path) -> None:
    token = tmp_path / "admin-token"
    token.write_text(f"{builtin.admin_token}\n")
    done = sas(
        "payment",
        "--url",
        builtin.url,
        "--forward",
        "/payment/charge",
        "--body-json",
        '{"order_id": "{task_id}", "amount_cents": 100, "currency": "EUR", "card": "4242424242424242"}',
        "--undo",
        "/payment/refund",
        "--undo-body-json",
        '{"order_id": "{task_id}", "charge_key": "{forward_key}", "charge_id": "{forward.charge_id}"}',
        "--fault-token-file",
        str(token),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert clause_lines(done.stdout)["in-flight"].startswith("ok   in-flight")


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["widgets", "--url", "ftp://127.0.0.1/"], 2, "not a service URL"),
        (["widgets", "--url", "http://user:pw@127.0.0.1/"], 2, "not a service URL"),
        (["widgets", "--url", "http://169.254.169.254/"], 2, "link-local"),
        (["Bad-Name", "--url", "http://127.0.0.1:9", "--forward", "/m", "--body-json", "{}"], 2, "service name"),
        (["no_such_service", "--url", "http://127.0.0.1:9"], 2, "no registered task type calls a service named"),
        (["flights", "--url", "http://127.0.0.1:9", "--body-json", "{}"], 2, "--body-json: only with --forward PATH"),
        (["widgets", "--url", "http://127.0.0.1:9", "--forward", "/make", "--body-json", "[1]"], 2, "JSON object"),
        (["widgets", "--url", "http://127.0.0.1:9", "--forward", "/make", "--body-json", "{nope"], 2, "is not JSON"),
        (["widgets", "--url", "http://127.0.0.1:9", "--forward", "make", "--body-json", "{}"], 2, "not a URL path"),
        (
            ["widgets", "--url", "http://127.0.0.1:9", "--forward", "/m", "--body-json", "@/nonexistent.json"],
            2,
            "No such",
        ),
    ],
)
def test_bad_input_is_one_line(args: list[str], code: int, said: str) -> None:
    done = sas(*args)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_service_that_is_not_there_is_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = sas("widgets", "--url", url, "--forward", "/make", "--body-json", "{}")
    assert done.returncode == 1
    assert done.stderr.strip() == f"sas: cannot reach {url}: ConnectError: All connection attempts failed"


def test_the_url_and_auth_header_come_from_the_service_s_settings(
    widgets: tuple[str, dict[str, Widgets]], tmp_path: Path
) -> None:
    url, state = widgets
    flags = widget_flags(url, "good")
    flags = flags[:1] + flags[3:]  # without --url
    body = tmp_path / "body.json"
    body.write_text('{"colour": "blue", "order": "{task_id}"}')
    flags[flags.index("--body-json") + 1] = f"@{body}"
    token = f"Bearer {fresh_id('token')}"
    done = sas(*flags, env={"SAS_SERVICES__WIDGETS__URL": url, "SAS_SERVICES__WIDGETS__AUTH_TOKEN": token})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == f"widgets at {url}"
    assert token in state["good"].auth


def test_a_rest_shaped_service_is_checked_from_its_declaration_with_the_same_json(payout_services: str) -> None:
    sample = '{"currency": "EUR", "recipients": [{"payee_id": "emp-cli", "amount_cents": 300}]}'
    done = sas("payout_bank", "--url", payout_services, "--input-json", sample, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert sorted(report) == ["calls", "ok", "results", "service", "url"]
    assert report["ok"] is True and report["calls"][0].startswith("payout_bank.pay: POST /payees/{payee_id}/payments")
    verdicts = {r["clause"]: r["verdict"] for r in report["results"]}
    assert list(verdicts) == CLAUSES
    assert [v for c, v in verdicts.items() if c not in ("refusal", "in-flight")] == ["pass"] * 6
    assert all(sorted(r) == ["call", "clause", "detail", "title", "verdict"] for r in report["results"])
