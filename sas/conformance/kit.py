"""Check a running service against sas's HTTP contract: :func:`check_service` runs every
clause on each of the service's calls and returns a :class:`ServiceReport`;
:func:`assert_conforms` fails a test naming each clause broken. ``sas check-service`` prints the
same report."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from sas.activities.outbound import RESPONSE_CAP, AnswerOverdue, ResponseTooLarge, post_capped
from sas.conformance import clauses
from sas.conformance.clauses import Session, SlowCall, SlowForward, Unanswered
from sas.conformance.exchange import Exchange
from sas.conformance.report import CLAUSE_TITLES, Clause, ClauseResult, ServiceReport, Verdict
from sas.conformance.target import (
    CheckTarget,
    ExplicitCalls,
    ServiceCheckError,
    derived_targets,
    explicit_target,
)
from sas.task_models.outbound import OutboundPolicy, OutboundRefused, check_url
from sas.task_models.plans import StepPolicyValues
from sas.task_models.text import bounded
from sas.task_types.discovery import Catalog, TaskTypeError
from sas.task_types.services import named_service

# A service under test may well be on this machine; link-local, multicast and the like stay refused.
_POLICY = OutboundPolicy(allow_http=True, allow_private=True)
_RUN = (
    (Clause.REPLAY, clauses.replay),
    (Clause.LOOKUP_DONE, clauses.lookup_done),
    (Clause.LOOKUP_NOTHING, clauses.lookup_nothing),
    (Clause.UNDO_FIRST, clauses.undo_first),
    (Clause.UNDO_NOTHING, clauses.undo_nothing),
    (Clause.REFUSAL, clauses.refusal),
    (Clause.IN_FLIGHT, clauses.in_flight),
)


async def check_service(
    name: str,
    url: str,
    *,
    calls: ExplicitCalls | None = None,
    sample_input: Mapping[str, Any] | None = None,
    refusing: Mapping[str, Any] | None = None,
    slow_forward: SlowForward | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
    slow_s: float = 2.0,
    retry: StepPolicyValues | None = None,
) -> ServiceReport:
    """Drive the service ``name`` at ``url`` through every clause of the HTTP contract.

    Its calls come from the registered task types (every step whose call on the service is
    declared as data, each request built as sas's HTTP Agent builds it), or from ``calls`` for
    a service whose Agents are hand-written. Only keys
    made up for the check are used (``sas-check-<hex>:<step>``).

    Args:
        name: The service's name as declared (``Service("flights")``).
        url: Its base URL (http or https).
        calls: The calls to check, said outright (hand-written Agents).
        sample_input: A task input for what the calls take from the input (``Input``: body
            fields, path parameters, query, headers; a ``ForEach`` step's first item).
        refusing: Fields that make the service refuse the forward for good, laid over the sample
            input (or over ``calls.body``); without them the refusal clause is not exercised.
        slow_forward: A hook that has the service hold one forward call (its fault injection);
            without it the in-flight clause is not exercised. :func:`builtin_services_slowdown`
            is the one for the demo services (examples/demo_services).
        headers: Sent with every request (the service's auth header).
        timeout_s: Longest one request may take, whole: sending it and reading its answer
            (0.1 to 600 s); more than ``slow_s``. Every answer is read up to 1 MiB.
        slow_s: How long a slowed forward is held (0.2 to 60 s).
        retry: How a transient answer is asked again, as the Agent's quick retries (the same
            request under the same key); default: a step's default policy (3 attempts, 0.5 s then
            1 s apart). An answer cut off at ``timeout_s`` is not asked again, so each request
            still ends within it; one still transient after the retries leaves its clause not
            exercised.

    Returns:
        One result per clause and call.

    Raises:
        ServiceCheckError: The check cannot run: an unknown service, a URL that is not one, a
            service that does not answer, a body that cannot be built. One line.
    """
    url = checked_url(url)
    if not 0.2 <= slow_s <= 60 or not 0.1 <= timeout_s <= 600 or timeout_s <= slow_s:
        raise ServiceCheckError("slow_s is 0.2 to 60 s, timeout_s 0.1 to 600 s and more than slow_s")
    targets = _targets(name, calls, sample_input, refusing)
    report = ServiceReport(service=name, url=url, calls=[t.describe() for t in targets])
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
        await _reachable(client, url, timeout_s)
        exchange = Exchange(client, url, headers, timeout_s, retry)
        for target in targets:
            session = Session(exchange, target, url, name, slow_forward, slow_s)
            found: dict[Clause, tuple[Any, str]] = {}
            for clause, run in _RUN:
                try:
                    found[clause] = await run(session)
                except Unanswered as gone:
                    found[clause] = (Verdict.NOT_EXERCISED, gone.detail())
            found[Clause.ANSWERS] = clauses.answers(session)
            for clause in Clause:
                verdict, detail = found[clause]
                report.results.append(
                    ClauseResult(
                        clause=clause,
                        call=target.forward.name,
                        verdict=verdict,
                        title=CLAUSE_TITLES[clause],
                        detail=detail,
                    )
                )
    return report


def assert_conforms(report: ServiceReport) -> None:
    """Fail (``AssertionError``) naming every clause the service broke, with what was seen."""
    if report.failed:
        broken = "; ".join(f"{r.call} {r.clause.value}: {r.detail}" for r in report.failed)
        raise AssertionError(f"service {report.service} at {report.url} breaks the HTTP contract: {broken}")


def builtin_services_slowdown(admin_token: str, timeout_s: float = 10.0) -> SlowForward:
    """The slowdown hook for the demo services (``sas services serve --enable-faults``):
    a one-time latency fault on the forward's endpoint, for the body's ``order_id``, posted to
    their ``/admin/faults`` with the admin token (``SAS_SERVICES__ADMIN_TOKEN``), its answer
    read up to 64 KiB within ``timeout_s`` in all."""

    async def slow(call: SlowCall) -> None:
        rule = {
            "endpoint": call.call,
            "kind": "latency",
            "latency_ms": int(call.seconds * 1000),
            "times": 1,
            "match_order_id": call.body.get("order_id"),
        }
        auth = {"Authorization": f"Bearer {admin_token}"}
        try:
            async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
                answer = await post_capped(
                    client, f"{call.url}/admin/faults", RESPONSE_CAP, within_s=timeout_s, json=rule, headers=auth
                )
        except (httpx.TransportError, httpx.DecodingError, AnswerOverdue, ResponseTooLarge) as err:
            raise ServiceCheckError(f"POST /admin/faults: no answer ({type(err).__name__})", bad_input=False) from None
        if answer.status_code != 201:
            said = bounded(answer.text, 200)
            raise ServiceCheckError(f"POST /admin/faults answered {answer.status_code}: {said}", bad_input=False)

    return slow


def checked_url(url: str) -> str:
    """``url`` if it is an http(s) URL sas would call (no credentials in it, no link-local or
    multicast address); else :class:`ServiceCheckError`."""
    try:
        check_url(url, _POLICY)
    except OutboundRefused as err:
        raise ServiceCheckError(f"not a service URL: {err}") from None
    return url.rstrip("/")


def _targets(
    name: str,
    calls: ExplicitCalls | None,
    sample_input: Mapping[str, Any] | None,
    refusing: Mapping[str, Any] | None,
) -> list[CheckTarget]:
    try:
        named_service(name)
    except ValueError as err:
        raise ServiceCheckError(str(err)) from None
    try:
        catalog: Catalog | None = _catalog()
    except TaskTypeError as err:
        if calls is None:
            raise ServiceCheckError(str(err)) from None
        catalog = None  # the calls are said outright; only their result models are missed
    if calls is not None:
        return [explicit_target(name, calls, catalog, refusing)]
    assert catalog is not None
    return derived_targets(name, catalog, sample_input, refusing)


def _catalog() -> Catalog:
    from sas.workflows import registry

    return registry.catalog()


async def _reachable(client: httpx.AsyncClient, url: str, timeout_s: float) -> None:
    """One request first, so that a service that is not there is one line, not eight failures.

    Any status will do, so its body is never read: the connection is closed once the headers
    are in (h11 caps those), all within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("GET", f"{url}/"):
                pass
    except TimeoutError:
        raise ServiceCheckError(
            f"cannot reach {url}: GET / got no answer within {timeout_s:g} s", bad_input=False
        ) from None
    except httpx.TransportError as err:
        raise ServiceCheckError(
            f"cannot reach {url}: {type(err).__name__}: {err or 'no answer'}", bad_input=False
        ) from None
