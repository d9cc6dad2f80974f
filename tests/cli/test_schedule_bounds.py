"""``sas schedule create`` keeps to documented bounds (each run is a real task, a real charge):
an interval from 1 minute (``SAS_SCHEDULES__MIN_INTERVAL_S`` lowers it) to 366 days, cron in
five fields, and never a cron that cannot fire. Each refusal is one line, before Temporal is
reached: the interval a second, 7-field crons, ``0 0 31 2 *`` and ``999999d`` were all accepted."""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import pytest

from sas.client.errors import InvalidInput
from sas.client.schedule_spec import check_cron, parse_every
from tests import cli_process


@pytest.mark.parametrize(
    "every, refused",
    [
        ("1s", "at least 1m between runs"),
        ("59s", "at least 1m between runs"),
        ("999999d", "at most 366d between runs"),
        ("367d", "at most 366d between runs"),
        ("0m", "use a whole number and a unit"),
    ],
)
def test_an_interval_outside_the_bounds_is_refused(every: str, refused: str) -> None:
    with pytest.raises(InvalidInput) as error:
        parse_every(every, min_interval_s=60)
    assert refused in error.value.message and "\n" not in error.value.message


def test_the_bounds_themselves_are_allowed_and_the_setting_lowers_the_minimum() -> None:
    assert parse_every("1m", min_interval_s=60) == timedelta(minutes=1)
    assert parse_every("366d", min_interval_s=60) == timedelta(days=366)
    assert parse_every("2s", min_interval_s=1) == timedelta(seconds=2)


@pytest.mark.parametrize(
    "cron, refused",
    [
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("* * * * * *", "6 field(s); use five fields"),
        ("0 0 0 * * * 2030", "7 field(s); use five fields"),
        ("61 * * * *", "the minute '61' is not in 0-59"),
        ("0 9 * * FUNDAY", "the day of week 'FUNDAY' is not in 0-7 or SUN-SAT"),
        ("0 0 5-1 * *", "runs backwards"),
        ("*/0 * * * *", "a step of 0"),
        ("@every 1s", "use five fields"),
        ("CRON_TZ=UTC 0 9 * * *", "6 field(s)"),
    ],
)
def test_a_cron_outside_the_bounds_is_refused(cron: str, refused: str) -> None:
    with pytest.raises(InvalidInput) as error:
        check_cron(cron)
    assert refused in error.value.message and "\n" not in error.value.message


@pytest.mark.parametrize(
    "cron", ["0 9 * * MON-FRI", "*/15 * * * *", "0 0 29 2 *", "0 0 31 */2 *", "5/15 0-6 ? jan-mar 0,7", "@daily"]
)
def test_a_cron_that_fires_is_taken(cron: str) -> None:
    assert check_cron(cron)


@pytest.mark.parametrize(
    "flags, refused",
    [
        (["--every", "1s"], "sas: --every '1s': at least 1m between runs (each run is a real task)"),
        (["--cron", "0 0 31 2 *"], "sas: --cron '0 0 31 2 *': never fires (no month in it has that day)"),
        (["--cron", "0 0 0 * * * *"], "sas: --cron '0 0 0 * * * *': 7 field(s)"),
        (["--every", "999999d"], "sas: --every '999999d': at most 366d between runs"),
    ],
)
def test_sas_schedule_create_refuses_in_one_line_before_reaching_temporal(flags: list[str], refused: str) -> None:
    order = ["--type", "order", "--set", "customer_id=c", "--set", "sku=BOOK-7", "--set", "quantity=1"]
    order += ["--set", "amount_cents=1", "--set", "card=4242424242424242", "--set", "address=a"]
    done = cli_process.run(
        [sys.executable, "-m", "sas.cli.main", "schedule", "create", "every-second", *flags, *order],
        capture_output=True,
        text=True,
        env={**os.environ, "SAS_TEMPORAL__ADDRESS": "127.0.0.1:9"},  # refused before any connection
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(refused), done.stderr
    assert "Traceback" not in done.stderr and "RPCError" not in done.stderr
