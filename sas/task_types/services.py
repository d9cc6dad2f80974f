"""Remote services, and the steps whose remote call is declared as data.

A :class:`Service` names a remote service. Its settings are ``SAS_SERVICES__<NAME>__*`` (URL,
auth header, timeout, connection pool, bulkhead, breaker, rate limit), its Agents run on its own
task queue (``<workflow queue>.<name>``), and its circuit breaker is shared by every worker. A
step calls a service in one of two ways:

- :class:`HttpCall`: the call declared as data - method, path, which input fields and earlier
  results make the JSON body, and the model of the answer. sas's generic HTTP Agent
  (``activities/http_agent.py``) runs it, with everything a hand-written Agent does.
- A hand-written Agent: one function that does the work, declared on its service,
  ``@PAYMENT.action("charge", ChargeResult) async def charge(call, agent)``, which a step
  references (``StepDefinition("charge", forward=charge)``). The older form - a declarations
  class implemented by the class the service names (``agent=``) - is deprecated: it still runs
  until sas 1.0, and a service declared so says so once, at load, naming the form to move to.

What a service must do to be called this way - its HTTP contract - is in ``docs/http-contract.md``.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel

from sas.task_models.activity_defs import AgentRef, register_result
from sas.task_models.ids import NAME, scoped_name
from sas.task_models.steps import StepCall
from sas.task_types.agent_declarations import (
    SERVICE_ATTR,
    AgentFunction,
    F,
    declare_function,
    declare_method,
    older_form,
)
from sas.task_types.names import check_action
from sas.task_types.sources import BodyValue, Result, value_of

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]

_AGENT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
# A declared call's path may hold parameters, each filled from its own source: /bookings/{booking_id}.
_TEMPLATE = re.compile(r"/(?:[A-Za-z0-9._~/-]|\{[a-z_][a-z0-9_]{0,39}\})*")
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]{0,39})\}")
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
# Headers sas sets itself on every call, or that only the HTTP layer may set.
_RESERVED_HEADERS = frozenset(
    {"idempotency-key", "authorization", "content-type", "content-length", "host", "transfer-encoding", "connection"}
)
_QUERY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PICK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\.[0-9]+)*")
# What a path parameter's value may not hold: anything that could take the call to another path.
_UNSAFE_SEGMENT = re.compile(r"(^\.{1,2}$)|/|\\|%2e|%2f|%5c|\.\.", re.IGNORECASE)
DEFAULT_LOOKUP = "/{service}/lookup"


def named_service(name: str) -> Service:
    """The bare declaration of the service of that name, a team's own (``north.flights``) or
    the platform's: what is known of a service only its name reaches."""
    team, _, short = name.rpartition(".")
    return Service(short, team=team or None)


@dataclass(frozen=True)
class Service:
    """A remote service that steps call.

    Attributes:
        name: 1-40 characters from a-z 0-9 _, starting with a letter. It names the service's
            settings (``SAS_SERVICES__<NAME>__URL``), its task queue and its breaker, and is the
            first part of its Agents' activity names (``<name>.<action>``). With a ``team``, it is
            read back under the team, ``<team>.<name>`` (``north.flights``), everywhere.
        agent: Deprecated (removed in sas 1.0): the older form's ``"package.module:Class"``.
            Declare each hand-written Agent on its function with ``Service.action`` instead.
        lookup: The path of ``GET <lookup>?idempotency_key=<forward key>``, which an undo asks
            when it does not have its forward step's result (docs/http-contract.md);
            ``{service}`` is replaced by the name (without its team). None: the service has no
            lookup.
        team: The team whose own service it is (1-40 characters from a-z 0-9 _, starting with a
            letter), so that two teams may each have a ``flights``: its name, activity names,
            task queue, breaker and metrics are ``<team>.<name>``, its settings are
            ``SAS_TEAMS__<TEAM>__SERVICES__<NAME>__*``, and only the team's task types may call
            it. The team and the name together take at most 40 characters. None: a service of
            the platform, which any task type may call.
    """

    name: str
    agent: str | None = None
    lookup: str | None = DEFAULT_LOOKUP
    team: str | None = None

    def __post_init__(self) -> None:
        if self.agent is not None:
            warnings.warn(older_form(self.name), FutureWarning, stacklevel=3)
        if self.team is not None and not NAME.fullmatch(self.team):
            raise ValueError(
                f"service {self.name}: team {self.team!r}: use 1-40 characters from a-z 0-9 _, starting with a letter"
            )
        if not NAME.fullmatch(self.short_name):
            raise ValueError(
                f"service name {self.short_name!r}: use 1-40 characters from a-z 0-9 _, starting with a letter"
            )
        object.__setattr__(self, "name", scoped_name(self.team, self.name))
        if self.agent is not None and not _AGENT_PATH.fullmatch(self.agent):
            raise ValueError(f"service {self.name}: agent={self.agent!r} is not 'package.module:Class'")
        if self.lookup is not None and not _PATH.fullmatch(self.lookup_path or ""):
            raise ValueError(f"service {self.name}: lookup={self.lookup!r} is not a URL path")

    @property
    def lookup_path(self) -> str | None:
        """The lookup's path with the service's name filled in; None without a lookup."""
        return None if self.lookup is None else self.lookup.replace("{service}", self.short_name)

    @property
    def short_name(self) -> str:
        """The name as declared, without its team: what the service itself is called at its URL."""
        return self.name.removeprefix(f"{self.team}.") if self.team is not None else self.name

    def agent_defn(self, action: str, result: type[BaseModel]) -> Callable[[F], F]:
        """Deprecated (removed in sas 1.0; use ``Service.action``): declare one of this service's
        hand-written Agents, as a method of a declarations class.

        Args:
            action: What it does (``charge``); its activity name is ``<service>.<action>``.
            result: The model of the service's answer (a ``StepResultModel``): the Agent validates
                the answer against it, and its ``Secret`` fields are never stored or shown.

        Returns:
            A decorator for an ``async def action(self, call: StepCall) -> StepResult`` whose body
            is ``raise NotImplementedError``: the class named by ``agent`` implements it with
            ``@implements(Declarations.action)``.
        """
        return declare_method(self, self.name, action, result)

    def action(
        self, action: str, result: type[BaseModel], *, reads: Iterable[str] | None = None
    ) -> Callable[[AgentFunction], AgentRef]:
        """Declare one of this service's hand-written Agents on the function that does its work.

        Args:
            action: What it does (``charge``); its activity name is ``<service>.<action>``.
            result: The model of the service's answer (a ``StepResultModel``): the answer to
                ``agent.perform`` is validated against it, and its ``Secret`` fields are never
                stored or shown.
            reads: The earlier steps whose results it reads from ``call.results`` (``("reserve",)``;
                ``()``: none). Only those are sent to it: each call carries less in the task's
                history, and no other step's result (a charge's ``Secret`` fields) reaches it. Each
                must name a step that finishes before this one starts (checked when the type is
                loaded). None (the default): every earlier step's result.

        Returns:
            A decorator for ``async def charge(call: StepCall, agent: AgentContext) -> StepResult``.
            What it returns is what a step names (``forward=charge``, ``undo=refund``); the worker
            runs the function under that name, behind the service's bulkhead. The function's module
            is imported in the workflow sandbox with the task type: keep its imports light (sas.api,
            pydantic, the team's models).
        """
        return declare_function(self, self.name, action, result, reads)

    def post(
        self,
        path: str,
        *,
        result: type[BaseModel],
        body: Mapping[str, BodyValue] | None = None,
        action: str | None = None,
    ) -> HttpCall:
        """``HttpCall(self, "POST", path, ...)``: the usual call."""
        return HttpCall(self, "POST", path, result=result, body=body or {}, action=action)


def service_of_ref(ref: Callable[..., Any]) -> Service | None:
    """The service a hand-written Agent's declaration was made for (``Service.agent_defn``)."""
    found = getattr(ref, SERVICE_ATTR, None)
    return found if isinstance(found, Service) else None


class UnsafeValue(ValueError):
    """A value that cannot be sent where it was declared to go (a path parameter that could
    change the path, a header value with a line break): the task's input is at fault."""


@dataclass(frozen=True)
class HttpRequest:
    """What a declared call sends for one ``StepCall``, built by :meth:`HttpCall.request`: the one
    place a declaration becomes a request (sas's HTTP Agent and the conformance kit both use it).

    Attributes:
        method: The HTTP method.
        path: The path, its parameters filled and URL-encoded.
        body: The JSON body; None for a GET.
        query: The declared query parameters, as text.
        headers: The declared headers, as text (sas adds its own).
    """

    method: str
    path: str
    body: dict[str, Any] | None
    query: dict[str, str]
    headers: dict[str, str]


@dataclass(frozen=True, eq=False)
class HttpCall:
    """A step's remote call, declared as data, run by sas's generic HTTP Agent.

    ``HttpCall(FLIGHTS, "POST", "/flights/book", body={"traveller": Input("traveller")},
    result=FlightBooked)`` sends ``{"traveller": ...}`` with the step's ``Idempotency-Key`` and
    validates the answer against ``FlightBooked``, which becomes the step's result. Everything a
    hand-written Agent does applies: the attempt's complete-by, transient and permanent errors,
    the service's bulkhead and breaker, heartbeats, the mirror writes and the checked client.

    A REST call: ``HttpCall(FLIGHTS, "DELETE", "/bookings/{booking_id}", params={"booking_id":
    Forward("booking_id")}, result=Cancelled, action="cancel")``.

    Attributes:
        service: The service called.
        method: ``POST`` (the usual), ``GET``, ``PUT``, ``PATCH`` or ``DELETE``.
        path: The URL path under the service's ``SAS_SERVICES__<NAME>__URL``; ``{name}`` marks a
            path parameter, filled from ``params``.
        result: The model of the answer (a ``StepResultModel``; ``Secret`` fields stay in the workflow).
        body: JSON field -> where its value comes from ([`Input`][sas.api.Input],
            [`Result`][sas.api.Result], [`Forward`][sas.api.Forward], [`Const`][sas.api.Const],
            [`TaskId`][sas.api.TaskId], [`ForwardKey`][sas.api.ForwardKey]). None with ``GET``.
        params: Path parameter -> where its value comes from (the same sources). Each value is
            URL-encoded as one path segment; one that could change the path (``/``, ``..``,
            ``%2e``, ``%2f``, a backslash, a control character) or is empty is refused for good.
        query: Query parameter -> where its value comes from; one whose value is None is left out.
        headers: Header -> where its value comes from. sas's own (``Idempotency-Key``,
            ``Authorization``, ``Content-Type``...) cannot be declared; a value with a control
            character is refused for good.
        pick: Result field -> where it is in the answer (``"data.booking.id"``, a list index as
            a number: ``"items.0.id"``): the result model is filled from these, for a service whose
            answer nests what the step keeps. Without it, the answer is the result.
        action: The activity's action name; default: the path's last segment, so
            ``/flights/book`` runs as the activity ``flights.book`` (a path that ends in a
            parameter needs one).
    """

    service: Service
    method: Method
    path: str
    result: type[BaseModel]
    body: Mapping[str, BodyValue] = field(default_factory=dict)
    action: str | None = None
    params: Mapping[str, BodyValue] = field(default_factory=dict)
    query: Mapping[str, BodyValue] = field(default_factory=dict)
    headers: Mapping[str, BodyValue] = field(default_factory=dict)
    pick: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            raise ValueError(f"HttpCall {self.path}: method {self.method!r}: use GET, POST, PUT, PATCH or DELETE")
        if not _TEMPLATE.fullmatch(self.path):
            raise ValueError(
                f"HttpCall {self.path!r}: the path must start with / (letters, digits, . _ ~ - /, and {{name}}"
                " for a path parameter)"
            )
        if self.method == "GET" and self.body:
            raise ValueError(f"HttpCall GET {self.path}: a GET sends no body; use query=... or params=...")
        for part, sources in self.sources().items():
            for key, value in sources.items():
                if not isinstance(value, BodyValue):
                    raise TypeError(
                        f"HttpCall {self.path}: {part}[{key!r}] = {value!r}: use Input, Result, Forward, Const,"
                        " TaskId or ForwardKey"
                    )
        named = _PLACEHOLDER.findall(self.path)
        if sorted(named) != sorted(self.params):
            raise ValueError(
                f"HttpCall {self.path}: its path parameters {sorted(named)} and params= {sorted(self.params)} differ;"
                " give each {name} of the path one source in params"
            )
        for name in self.query:
            if not _QUERY_NAME.fullmatch(name):
                raise ValueError(f"HttpCall {self.path}: query parameter {name!r}: 1-64 of A-Z a-z 0-9 _ . -")
        for name in self.headers:
            if not _HEADER_NAME.fullmatch(name) or name.lower() in _RESERVED_HEADERS:
                raise ValueError(
                    f"HttpCall {self.path}: header {name!r}: a header name (A-Z a-z 0-9 -), not one sas sets"
                    f" itself ({', '.join(sorted(_RESERVED_HEADERS))})"
                )
        for target, where in self.pick.items():
            if target not in self.result.model_fields or not _PICK.fullmatch(where):
                raise ValueError(
                    f"HttpCall {self.path}: pick[{target!r}] = {where!r}: name a field of {self.result.__name__}"
                    " and where it is in the answer (data.booking.id)"
                )
        check_action(self.service.name, self.verb)
        for part in ("body", "params", "query", "headers", "pick"):
            object.__setattr__(self, part, dict(getattr(self, part)))
        register_result(self.name, self.result)

    @property
    def verb(self) -> str:
        """The action part of the activity name."""
        return self.action or self.path.rstrip("/").rsplit("/", 1)[-1].replace("-", "_")

    @property
    def name(self) -> str:
        """The activity name, ``<service>.<action>``: recorded in each task's plan and the mirror."""
        return f"{self.service.name}.{self.verb}"

    def sources(self) -> dict[str, Mapping[str, BodyValue]]:
        """Every value the call sends, by where it goes: body, params, query, headers."""
        return {"body": self.body, "params": self.params, "query": self.query, "headers": self.headers}

    @property
    def reads(self) -> frozenset[str]:
        """The earlier steps whose results the call sends (its ``Result`` sources): the only
        results its calls carry."""
        return frozenset(v.step for values in self.sources().values() for v in values.values() if isinstance(v, Result))

    def request(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> HttpRequest:
        """Everything this call sends for ``call`` (``forward``: for an undo, its forward step's
        result); UnsafeValue for a value that cannot go where it was declared to."""
        return HttpRequest(
            method=self.method,
            path=self.build_path(call, forward),
            body=None if self.method == "GET" else self.build_body(call, forward),
            query=self.build_query(call, forward),
            headers=self.build_headers(call, forward),
        )

    def build_body(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body this call sends for ``call``: each field from where it is declared to
        come. ``forward``: for an undo, its forward step's result (as completed by the lookup)."""
        return self._values(self.body, call, forward)

    def build_path(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> str:
        """The path with each parameter filled and URL-encoded as one segment; UnsafeValue for a
        value that could change the path."""
        values = self._values(self.params, call, forward)

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            value = values[name]
            text = "" if value is None else str(value)
            if not text or not text.isprintable() or _UNSAFE_SEGMENT.search(text):
                raise UnsafeValue(f"{self.name}: path parameter {name} = {text[:80]!r} could change the path")
            return quote(text, safe="")

        return _PLACEHOLDER.sub(fill, self.path)

    def build_query(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The query parameters, each as text; one whose value is None is left out."""
        return {
            name: _text(value) for name, value in self._values(self.query, call, forward).items() if value is not None
        }

    def build_headers(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The declared headers, each as text; UnsafeValue for one with a control character."""
        found = self._values(self.headers, call, forward)
        headers = {name: _text(value) for name, value in found.items() if value is not None}
        for name, text in headers.items():
            if not text.isprintable():
                raise UnsafeValue(f"{self.name}: header {name} holds a control character")
        return headers

    def _values(
        self, part: Mapping[str, BodyValue], call: StepCall, forward: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Each value of ``part`` from its source; an undo's ``Forward`` values from ``forward`` if
        given (its forward result as completed by the lookup), else from the call's own."""
        known = forward or call.forward_result or {}
        return {name: value_of(source, call, known) for name, source in part.items()}

    def picked(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        """The answer as the result: each ``pick`` field taken from where it is (absent: None,
        which the result model then refuses if the field is required); the answer itself
        without ``pick``."""
        if not self.pick:
            return dict(answer)
        return {target: _dig(answer, where) for target, where in self.pick.items()}

    def signature(self) -> tuple[Any, ...]:
        """What makes two declarations of one activity name the same call."""
        return (
            self.service,
            self.method,
            self.path,
            _model_id(self.result),
            *(tuple(sorted(part.items(), key=str)) for part in self.sources().values()),
            tuple(sorted(self.pick.items())),
        )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict | list) else str(value)


def _dig(answer: Any, where: str) -> Any:
    value = answer
    for part in where.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _model_id(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}"
