"""The tests' forked `sas` commands (tests/cli_process.py) behave as a fresh interpreter's would:
the same output and exit code, the request's own environment, folder and stdin, and a timeout
that stops the command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_process

MAIN = [sys.executable, "-m", "sas.cli.main"]
CODE = [sys.executable, "-c", cli_process.MAIN_CODE]


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["submit", "--help"], ["nosuch"], ["list"], ["show", "t-1"]],
    ids=lambda a: " ".join(a),
)
@pytest.mark.parametrize("start", [MAIN, CODE], ids=["-m", "-c"])
def test_a_forked_command_says_and_exits_as_a_fresh_one(start: list[str], args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80", "SAS_TEMPORAL__ADDRESS": "127.0.0.1:1"}
    env.pop("SAS_DATABASE__URL", None)
    forked = cli_process.run([*start, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    fresh = subprocess.run([*start, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert list(tmp_path.iterdir()) == []  # and, like it, created nothing in the folder


def test_each_command_has_its_own_environment_folder_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for name in ("a", "b"):
        url = f"sqlite+aiosqlite:///{tmp_path / name / 'missing.db'}"
        done = cli_process.run([*MAIN, "list"], capture_output=True, text=True, cwd=tmp_path / name,
                               env={**os.environ, "SAS_DATABASE__URL": url})  # fmt: skip
        assert done.returncode == 1 and f"no sas state store at {tmp_path / name / 'missing.db'}" in done.stderr
    piped = cli_process.run(
        [*MAIN, "submit", "--type", "order", "--input", "-", "--id", "ok-1"],
        input="not json",
        capture_output=True,
        text=True,
        env={**os.environ, "SAS_TEMPORAL__ADDRESS": "127.0.0.1:1"},
    )
    assert piped.returncode == 1 and "sas: -: not valid JSON" in piped.stderr  # it read what was given


def test_a_command_past_its_timeout_is_stopped(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(subprocess.TimeoutExpired):
            cli_process.run([*MAIN, "schedule", "list"], capture_output=True, cwd=tmp_path,
                            env={**os.environ, "SAS_TEMPORAL__ADDRESS": address}, timeout=1)  # fmt: skip


def test_other_programs_run_as_they_are() -> None:
    done = cli_process.run([sys.executable, "-c", "print('plain')"], capture_output=True, text=True)
    assert done.stdout == "plain\n"
