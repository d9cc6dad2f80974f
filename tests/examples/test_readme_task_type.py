"""The README's "Build your own task type", exactly as printed: its module and its test, taken
from the README; and the type end to end - found through the setting, run by a real worker on
the dev server against a service of a few lines - completing, and undone when a call is refused."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from tests.helpers import forget_package, fresh_id, serving, team_package
from tests.stack import ADMIN_TOKEN, start_stack

README = Path(__file__).resolve().parents[2] / "README.md"


def printed(first_line: str) -> str:
    """The README's python block that starts with ``first_line``."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"the README has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def signup_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``my_team/signup.py`` as printed, registered by ``SAS_TASK_TYPES__MODULES``."""
    team_package(tmp_path, {"signup.py": printed("# my_team/signup.py")})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "my_team.signup")
    get_settings.cache_clear()
    registry.refresh()
    yield
    forget_package("my_team")
    get_settings.cache_clear()
    registry.refresh()


def test_the_printed_module_is_about_forty_lines() -> None:
    # 43: the grant says why it has no undo (irreversible=...), as every step must.
    assert len(printed("# my_team/signup.py").splitlines()) <= 43


async def test_the_printed_test_passes(signup_module: None) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(printed("# tests/test_signup.py"), "tests/test_signup.py", "exec"), namespace)
    await namespace["test_a_refused_grant_closes_the_account"]()


def accounts_service(calls: list[tuple[str, dict[str, Any]]]) -> Starlette:
    """The team's accounts service, as small as the contract allows (docs/http-contract.md)."""
    answers: dict[str, dict[str, Any]] = {}

    async def call(request: Request) -> Response:
        key, body = request.headers["Idempotency-Key"], await request.json()
        action = request.url.path.rsplit("/", 1)[-1]
        calls.append((action, body))
        if key in answers:
            return JSONResponse(answers[key])
        if action == "grant" and body["plan"] == "gold":
            return JSONResponse({"error": "no_such_plan", "message": "there is no gold plan"}, status_code=422)
        answers[key] = {"account_id": f"acc_{len(answers)}"} if action == "open" else {"ok": True}
        return JSONResponse(answers[key])

    async def lookup(request: Request) -> Response:
        return JSONResponse(answers.get(request.query_params["idempotency_key"], {"account_id": None}))

    routes = [Route(f"/accounts/{a}", call, methods=["POST"]) for a in ("open", "close", "grant")]
    return Starlette(routes=[*routes, Route("/accounts/lookup", lookup, methods=["GET"])])


@pytest_asyncio.fixture
async def accounts() -> AsyncIterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with serving(accounts_service(calls), "the accounts service") as url:
        yield url, calls


@pytest.mark.slow
async def test_the_printed_type_runs_on_a_worker_against_its_service(
    signup_module: None,
    accounts: tuple[str, list[Any]],
    client: Client,
    temporal_address: str,
    services,
    sqlite_url: str,  # type: ignore[no-untyped-def]
) -> None:
    url, calls = accounts
    where = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, accounts=ServiceSettings(url=url))  # type: ignore[call-arg]
    async with start_stack(client, temporal_address, services.url, sqlite_url, services=where) as stack:
        done = fresh_id("signup")
        result: TaskResult = await (await stack.submit(done, {"email": "ada@example.com"}, "SignupWorkflow")).result()
        assert result.state == TaskState.PROCESSED
        assert [action for action, _ in calls] == ["open", "grant"]
        refused = fresh_id("signup-gold")
        result = await (
            await stack.submit(refused, {"email": "bo@example.com", "plan": "gold"}, "SignupWorkflow")
        ).result()
        assert result.state == TaskState.COMPENSATED
        close = [body for action, body in calls if action == "close"]
        opened = next(s for s in result.steps if s.name == "open").result
        assert opened is not None
        assert close == [{"account_id": opened["account_id"], "key": f"{refused}:open"}]  # the account it opened, once
        assert await stack.step_states(refused) == {"open": "Compensated", "grant": "Compensated"}
