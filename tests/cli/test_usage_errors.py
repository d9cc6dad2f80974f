"""A bad flag value gets click's usage error (exit 2, the flag named), never "unexpected ..."."""

from __future__ import annotations

import os
import sys

import pytest

from tests import cli_process


@pytest.mark.parametrize(
    ("argv", "named"),
    [(["list", "--limit", "0"], "'--limit'"), (["list", "--limit", "many"], "'--limit'"), (["nosuch"], "nosuch")],
)
def test_a_bad_flag_is_a_usage_error(argv: list[str], named: str) -> None:
    done = cli_process.run(
        [sys.executable, "-m", "sas.cli.main", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "SAS_DATABASE__URL": "sqlite+aiosqlite:////nonexistent/never-opened.db"},
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "unexpected" not in done.stderr and "Traceback" not in done.stderr
