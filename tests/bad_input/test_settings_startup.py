"""Invalid settings stop every entry point at start-up with exit code 2 and a message
naming the variable - never a stack trace, never the rejected secret.

Each case runs ``python worker.py``, ``python -m sas.supervisor`` and ``sas list`` as real
processes in an empty directory (no stray .env), with every inherited SAS_* removed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sas_demo_services import free_port
from tests import cli_process

pytestmark = pytest.mark.slow  # each starts a worker or Supervisor process

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "worker": [sys.executable, str(ROOT / "worker.py")],
    "supervisor": [sys.executable, "-m", "sas.supervisor"],
    "sas list": [sys.executable, "-m", "sas.cli.main", "list"],
}
SECRET = "hunter2-Zq9"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_process.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=90)


async def start_all(
    tmp_path: Path, bad: dict[str, str], commands: tuple[str, ...] = tuple(COMMANDS)
) -> dict[str, subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SAS_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "COLUMNS": "200",
            # Valid, harmless defaults: a private state store and a Temporal address where nothing listens.
            "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
            "SAS_TEMPORAL__ADDRESS": f"127.0.0.1:{free_port()}",
        }
    )
    env.update(bad)
    done = await asyncio.gather(*(asyncio.to_thread(_run, COMMANDS[name], env, tmp_path) for name in commands))
    return dict(zip(commands, done, strict=False))


def assert_clear_refusal(results: dict[str, subprocess.CompletedProcess[str]], *variables: str) -> None:
    for name, done in results.items():
        shown = f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, shown
        assert done.returncode == 2, shown
        assert "invalid settings" in done.stderr, shown
        for variable in variables:
            assert variable in done.stderr, (variable, shown)
        assert SECRET not in done.stderr + done.stdout, shown


async def test_many_bad_values_at_once_are_all_named(tmp_path: Path) -> None:
    results = await start_all(
        tmp_path,
        {
            "SAS_SERVICES__URL": "ftp://services.internal",
            "SAS_DATABASE__URL": f"mysql://sas:{SECRET}@db/sas",
            "SAS_SUPERVISOR__INTERVAL_S": "every five seconds",
            "SAS_SUPERVISOR__FAILURE_THRESHOLD": "0",
            "SAS_DEFAULT_STEP__MAX_ATTEMPTS": "-3",
            "SAS_TEMPORAL__ADDRESS": "no-port-here",
            "SAS_LOG_LEVEL": "LOUD",
        },
    )
    assert_clear_refusal(
        results,
        "SAS_SERVICES__URL",
        "SAS_DATABASE__URL",
        "SAS_SUPERVISOR__INTERVAL_S",
        "SAS_SUPERVISOR__FAILURE_THRESHOLD",
        "SAS_DEFAULT_STEP__MAX_ATTEMPTS",
        "SAS_TEMPORAL__ADDRESS",
        "SAS_LOG_LEVEL",
    )


async def test_half_a_tls_pair_is_named(tmp_path: Path) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    results = await start_all(
        tmp_path, {"SAS_TEMPORAL__TLS__ENABLED": "true", "SAS_TEMPORAL__TLS__CLIENT_CERT_PATH": str(cert)}
    )
    assert_clear_refusal(results, "SAS_TEMPORAL__TLS")
    assert "must be set together" in results["worker"].stderr


async def test_a_bad_encryption_key_is_named_and_not_echoed(tmp_path: Path) -> None:
    results = await start_all(
        tmp_path, {"SAS_ENCRYPTION__KEYS": f'{{"k1": "{SECRET}"}}', "SAS_ENCRYPTION__CURRENT_KEY_ID": "k1"}
    )
    assert_clear_refusal(results, "SAS_ENCRYPTION__KEYS")
    assert "not valid base64" in results["worker"].stderr


@pytest.mark.parametrize("variable, value", [("SAS_ENCRYPTION__KEYS", "k1=" + SECRET), ("SAS_STEPS", "charge=30")])
async def test_a_map_variable_that_is_not_json_is_named(tmp_path: Path, variable: str, value: str) -> None:
    assert_clear_refusal(await start_all(tmp_path, {variable: value}), variable)


@pytest.mark.parametrize("problem", ["missing", "not PEM"])
async def test_unreadable_tls_files_are_named(tmp_path: Path, problem: str) -> None:
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    if problem == "not PEM":
        cert.write_text("this is not a certificate\n")
        key.write_text("nor is this a key\n")
    results = await start_all(
        tmp_path,
        {
            "SAS_TEMPORAL__TLS__ENABLED": "true",
            "SAS_TEMPORAL__TLS__CLIENT_CERT_PATH": str(cert),
            "SAS_TEMPORAL__TLS__CLIENT_KEY_PATH": str(key),
        },
        commands=("worker", "supervisor"),
    )
    assert_clear_refusal(results, "SAS_TEMPORAL__TLS__CLIENT_CERT_PATH")


async def test_webhook_secrets_not_in_standard_webhooks_form_and_an_internal_webhook_url_are_named(
    tmp_path: Path,
) -> None:
    results = await start_all(
        tmp_path,
        {
            "SAS_CALLBACKS__SECRET": SECRET,
            "SAS_SUPERVISOR__WEBHOOK__SECRET": f"whsec_{SECRET}!",
            "SAS_SUPERVISOR__WEBHOOK__URL": "https://169.254.169.254/latest/meta-data/",
        },
    )
    assert_clear_refusal(results, "SAS_CALLBACKS__SECRET", "SAS_SUPERVISOR__WEBHOOK__SECRET")
    assert "whsec_" in results["worker"].stderr
    # The URL's own check runs once the secrets are fixed.
    good = "whsec_" + "A" * 44
    results = await start_all(
        tmp_path,
        {
            "SAS_CALLBACKS__SECRET": good,
            "SAS_SUPERVISOR__WEBHOOK__SECRET": good,
            "SAS_SUPERVISOR__WEBHOOK__URL": "https://169.254.169.254/latest/meta-data/",
        },
    )
    assert_clear_refusal(results, "SAS_SUPERVISOR__WEBHOOK__URL")
    assert "link-local" in results["supervisor"].stderr
