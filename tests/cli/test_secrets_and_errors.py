"""Every ``sas`` command, run as a person runs it with real secrets set (a database URL with a
password, the callback and webhook secrets, an encryption key, a Temporal API key): no secret is
ever printed. A dependency that cannot be reached (Temporal, the database) ends a command with one
clear line, exit code 1 and no traceback; ``--debug`` adds the traceback."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sas_demo_services.launcher import free_port
from tests import cli_process
from tests.helpers import fresh_id
from tests.postgres import fresh_database

pytestmark = pytest.mark.slow  # sas commands waiting on unreachable servers

PASSWORD = f"pw-{fresh_id('db')}"
# Standard Webhooks secrets: whsec_ and base64 of random bytes (docs/webhooks.md).
CALLBACK_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
WEBHOOK_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
API_KEY = f"key-{fresh_id('api')}"
ENCRYPTION_KEY = base64.b64encode(os.urandom(32)).decode()
SECRETS = [PASSWORD, CALLBACK_SECRET, WEBHOOK_SECRET, API_KEY, ENCRYPTION_KEY]

ORDER = ["--type", "order", *("--set", "customer_id=c-1", "--set", "sku=S-1", "--set", "quantity=1")]
ORDER += ["--set", "amount_cents=100", "--set", "address=1 Main St"]


def with_password(url: str) -> str:
    """The same database, with a password in the URL (the test server trusts loopback, so it is ignored)."""
    return url.replace("postgresql+asyncpg://postgres@", f"postgresql+asyncpg://postgres:{PASSWORD}@", 1)


def secret_env(database_url: str, temporal_address: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    return env | {
        "SAS_DATABASE__URL": database_url,
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": fresh_id("secrets-queue"),
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": fresh_id("secrets-supervisor"),
        "SAS_SUPERVISOR__WORKFLOW_ID": fresh_id("secrets-supervisor"),
        "SAS_CALLBACKS__SECRET": CALLBACK_SECRET,
        "SAS_SUPERVISOR__WEBHOOK__URL": "http://127.0.0.1:9/hook",
        # a local receiver: allowed only by the outbound policy's development settings
        "SAS_OUTBOUND__ALLOW_HTTP": "true",
        "SAS_OUTBOUND__ALLOW_PRIVATE": "true",
        "SAS_SUPERVISOR__WEBHOOK__SECRET": WEBHOOK_SECRET,
        "SAS_ENCRYPTION__KEYS": f'{{"k1": "{ENCRYPTION_KEY}"}}',
        "SAS_ENCRYPTION__CURRENT_KEY_ID": "k1",
        "COLUMNS": "250",
        **more,
    }


def run_sas(env: dict[str, str], cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return cli_process.run(
        [sys.executable, "-m", "sas.cli.main", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


async def sas(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_sas, env, cwd, *args)


def printed(stderr: str) -> list[str]:
    """What a command said to the person: its stderr less the JSON log lines of a worker starting up."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("{")]


def assert_no_secret(done: subprocess.CompletedProcess[str], what: str) -> None:
    shown = done.stdout + done.stderr
    for secret in SECRETS:
        assert secret not in shown, f"`sas {what}` printed a secret ({secret[:6]}...):\n{shown[-2000:]}"


@pytest.fixture
def database_url() -> Iterator[str]:
    with fresh_database() as url:
        yield with_password(url)


@pytest.mark.usefixtures("postgres_required")
async def test_no_command_prints_a_secret(temporal_address: str, database_url: str, tmp_path: Path) -> None:
    env = secret_env(database_url, temporal_address)
    task_id, schedule_id = fresh_id("secrets"), fresh_id("secrets-schedule")
    commands = [
        ["migrate"],
        ["setup"],
        ["submit", *ORDER, "--id", task_id],
        ["submit", *ORDER, "--id", task_id, "--json"],
        ["status", task_id],
        ["status", task_id, "--json"],
        ["show", task_id],
        ["list"],
        ["list", "--json"],
        ["alerts", "--status", "all"],
        ["alerts", "ack", "1"],
        ["alerts", "resolve", "1"],
        # Nothing runs the task (no worker): the operator updates go to ids Temporal does not know.
        ["retry", fresh_id("none"), "--reason", "r"],
        ["resubmit", fresh_id("none")],
        ["compensate", fresh_id("none")],
        ["schedule", "create", schedule_id, "--every", "1h", *ORDER],
        ["schedule", "list"],
        ["schedule", "pause", schedule_id],
        ["schedule", "unpause", schedule_id],
        ["schedule", "delete", schedule_id],
        ["--help"],
    ]
    results = []
    for args in commands:
        done = await sas(env, tmp_path, *args)
        assert "Traceback" not in done.stderr, (args, done.stderr[-2000:])
        assert_no_secret(done, " ".join(args))
        results.append(done)
    by_name = dict(zip((" ".join(c[:2]) for c in commands), results, strict=True))
    # The commands did reach both dependencies, and the URL they name has its password masked.
    assert results[0].returncode == 0 and "postgres:***@127.0.0.1" in results[0].stdout  # migrate
    assert results[2].returncode == 0 and f"submitted order {task_id}" in results[2].stdout
    assert by_name["schedule create"].returncode == 0 and schedule_id in by_name["schedule list"].stdout
    assert by_name["list --json"].returncode == 0 and by_name["list --json"].stdout.strip() == "[]"  # no worker ran it


@pytest.mark.usefixtures("postgres_required")
async def test_the_long_running_commands_print_no_secret_either(
    temporal_address: str, database_url: str, tmp_path: Path
) -> None:
    """The worker, the Supervisor and the codec server, started and stopped as an operator would."""
    env = secret_env(database_url, temporal_address, SAS_LOG_LEVEL="DEBUG")
    for args, ready in (
        (["worker"], "polling"),
        (["supervisor"], "polling"),
        (["codec-server", "--port", str(free_port())], "codec server on"),
    ):
        output = await asyncio.to_thread(run_until, env, tmp_path, args, ready)
        if args[0] != "codec-server":  # its start-up checks are another test's business
            assert ready in output, (args, output[-3000:])
        for secret in SECRETS:
            assert secret not in output, f"`sas {args[0]}` printed a secret ({secret[:6]}...)"


def run_until(env: dict[str, str], cwd: Path, args: list[str], ready: str, timeout: float = 60) -> str:
    """Start ``sas ARGS``, wait until ``ready`` shows in its output (or it exits), stop it; all it printed."""
    import time

    log = cwd / f"{args[0]}.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "sas.cli.main", *args], env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and process.poll() is None and ready not in log.read_text(errors="replace"):
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(30)
    return log.read_text(errors="replace")


async def test_an_unreachable_dependency_is_one_line_with_no_secret(tmp_path: Path) -> None:
    closed = free_port()
    temporal = f"127.0.0.1:{free_port()}"
    database = f"postgresql+asyncpg://postgres:{PASSWORD}@127.0.0.1:{closed}/sas"
    # An API key too: with it the client asks for TLS, and it must not show up in any failure.
    env = secret_env(database, temporal, SAS_TEMPORAL__API_KEY=API_KEY)
    state_store_line = f"sas: cannot use the state store at postgresql+asyncpg://postgres:***@127.0.0.1:{closed}/sas: connection refused"
    temporal_line = f"sas: cannot reach Temporal at {temporal}"
    expected = {
        ("migrate",): state_store_line,
        ("list",): state_store_line,
        ("alerts",): state_store_line,
        ("alerts", "ack", "1"): state_store_line,
        ("show", "t-1"): state_store_line,
        ("worker",): state_store_line,  # it migrates first
        ("supervisor",): state_store_line,
        ("setup",): temporal_line,
        ("submit", *ORDER): temporal_line,
        ("status", "t-1"): temporal_line,
        ("retry", "t-1"): temporal_line,
        ("compensate", "t-1"): temporal_line,
        ("schedule", "list"): temporal_line,
        ("schedule", "delete", "s-1"): temporal_line,
    }
    for args, line in expected.items():
        done = await sas(env, tmp_path, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        lines = printed(done.stderr)
        assert lines[0] == line, (args, done.stderr)
        assert len(lines) == 2 and lines[1].startswith("  "), (args, done.stderr)  # the line, and what to do
        assert_no_secret(done, " ".join(args))

    debug = await sas(env, tmp_path, "--debug", "list")
    assert debug.returncode == 1 and "Traceback" in debug.stderr and state_store_line in debug.stderr
    assert_no_secret(debug, "--debug list")


async def test_cannot_reach_temporal_says_where_and_what_to_do(tmp_path: Path) -> None:
    """The state store is fine (SQLite); only Temporal is missing."""
    address = f"127.0.0.1:{free_port()}"
    env = secret_env(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}", address)
    schedule = ["--every", "1d", *ORDER]
    for args in (
        ["worker"],
        ["supervisor"],
        ["status", "t-1"],
        ["show", "t-1"],
        ["submit", *ORDER],
        ["resubmit", "t-1", "--reason", "r"],
        ["reconcile", "--dry-run"],
        ["reconcile", "--task", "t-1"],
        ["schedule", "create", "s-1", *schedule],
        ["schedule", "pause", "s-1"],
        ["schedule", "unpause", "s-1"],
    ):
        done = await sas(env, tmp_path, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert printed(done.stderr) == [
            f"sas: cannot reach Temporal at {address}",
            "  start it with `sas up` (or `sas demo`), or point SAS_TEMPORAL__ADDRESS (and its TLS or API key "
            "settings) at your cluster; --debug shows the client's own error",
        ], (args, done.stderr)
    # `sas list` reads the state store alone (stuck workflows too, from the Supervisor's alerts),
    # so it still answers with Temporal away.
    listed = await sas(env, tmp_path, "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout + listed.stderr
