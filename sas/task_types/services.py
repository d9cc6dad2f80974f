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
  references (``StepDefinition("charge", forward=charge)``). The older form - a declaration
  ``@PAYMENT.agent_defn(...)`` implemented by the class the service names (``Service("payment",
  agent="my_pkg.agents:PaymentAgent")``) - still runs.

What a service must do to be called this way - its HTTP contract - is in ``docs/http-contract.md``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel

from sas.task_models.activity_defs import AgentRef, agent_defn, register_result
from sas.task_models.steps import StepCall, StepResult

if TYPE_CHECKING:
    from sas.task_types.agent_context import AgentContext

F = TypeVar("F", bound=Callable[..., Any])
Method = Literal["POST", "PUT", "PATCH", "DELETE"]

_SERVICE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_ACTION = re.compile(r"[a-z][a-z0-9_]{0,39}")
_AGENT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
# The attribute a hand-written Agent's declaration carries its service in.
SERVICE_ATTR = "__sas_service__"
# The attribute an Agent declared with ``Service.action`` carries the function that does its work in.
AGENT_FUNCTION_ATTR = "__sas_agent_function__"
# What ``Service.action`` decorates: the work of one attempt, given the step and its context.
AgentFunction = Callable[["StepCall", "AgentContext"], Awaitable["StepResult"]]
DEFAULT_LOOKUP = "/{service}/lookup"


@dataclass(frozen=True)
class Service:
    """A remote service that steps call.

    Attributes:
        name: 1-40 characters from a-z 0-9 _, starting with a letter. It names the service's
            settings (``SAS_SERVICES__<NAME>__URL``), its task queue and its breaker, and is the
            first part of its Agents' activity names (``<name>.<action>``).
        agent: For hand-written Agents: ``"package.module:Class"``, the ``sas.api.Agent`` subclass
            that implements this service's ``agent_defn`` declarations. Imported by the worker only,
            never inside a workflow. None: the service is called by ``HttpCall`` steps alone.
        lookup: The path of ``GET <lookup>?idempotency_key=<forward key>``, which an undo asks
            when it does not have its forward step's result (docs/http-contract.md);
            ``{service}`` is replaced by the name. None: the service has no lookup.
    """

    name: str
    agent: str | None = None
    lookup: str | None = DEFAULT_LOOKUP

    def __post_init__(self) -> None:
        if not _SERVICE_NAME.fullmatch(self.name):
            raise ValueError(f"service name {self.name!r}: use 1-40 characters from a-z 0-9 _, starting with a letter")
        if self.agent is not None and not _AGENT_PATH.fullmatch(self.agent):
            raise ValueError(f"service {self.name}: agent={self.agent!r} is not 'package.module:Class'")
        if self.lookup is not None and not _PATH.fullmatch(self.lookup_path or ""):
            raise ValueError(f"service {self.name}: lookup={self.lookup!r} is not a URL path")

    @property
    def lookup_path(self) -> str | None:
        """The lookup's path with the service's name filled in; None without a lookup."""
        return None if self.lookup is None else self.lookup.replace("{service}", self.name)

    def agent_defn(self, action: str, result: type[BaseModel]) -> Callable[[F], F]:
        """Declare one of this service's hand-written Agents, as a method of a declarations class.

        Args:
            action: What it does (``charge``); its activity name is ``<service>.<action>``.
            result: The model of the service's answer (a ``StepResultModel``): the Agent validates
                the answer against it, and its ``Secret`` fields are never stored or shown.

        Returns:
            A decorator for an ``async def action(self, call: StepCall) -> StepResult`` whose body
            is ``raise NotImplementedError``: the class named by ``agent`` implements it with
            ``@implements(Declarations.action)``.
        """
        _check_action(self.name, action)
        declare = agent_defn(f"{self.name}.{action}", result)

        def decorate(fn: F) -> F:
            declared = declare(fn)
            setattr(declared, SERVICE_ATTR, self)
            return declared

        return decorate

    def action(self, action: str, result: type[BaseModel]) -> Callable[[AgentFunction], AgentRef]:
        """Declare one of this service's hand-written Agents on the function that does its work.

        Args:
            action: What it does (``charge``); its activity name is ``<service>.<action>``.
            result: The model of the service's answer (a ``StepResultModel``): the answer to
                ``agent.perform`` is validated against it, and its ``Secret`` fields are never
                stored or shown.

        Returns:
            A decorator for ``async def charge(call: StepCall, agent: AgentContext) -> StepResult``.
            What it returns is what a step names (``forward=charge``, ``undo=refund``); the worker
            runs the function under that name on the service's own queue. The function's module
            is imported in the workflow sandbox with the task type: keep its imports light (sas.api,
            pydantic, the team's models).
        """
        _check_action(self.name, action)
        declare = agent_defn(f"{self.name}.{action}", result)

        def decorate(work: AgentFunction) -> AgentRef:
            if not inspect.iscoroutinefunction(work):
                raise TypeError(f"{self.name}.{action}: the Agent {work.__qualname__} must be an async def")
            if len(inspect.signature(work).parameters) != 2:
                raise TypeError(
                    f"{self.name}.{action}: the Agent {work.__qualname__} takes (call: StepCall, agent: AgentContext)"
                )

            async def declared(call: StepCall) -> StepResult:
                raise NotImplementedError(f"{self.name}.{action} runs on a worker, as an activity")

            for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
                setattr(declared, attribute, getattr(work, attribute))
            ref = declare(declared)
            setattr(ref, SERVICE_ATTR, self)
            setattr(ref, AGENT_FUNCTION_ATTR, work)
            return ref

        return decorate

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


def agent_function(ref: Callable[..., Any]) -> AgentFunction | None:
    """The function that does the work of an Agent declared with ``Service.action``; None for
    the older form (implemented by the class its service names)."""
    return getattr(ref, AGENT_FUNCTION_ATTR, None)


def service_of_ref(ref: Callable[..., Any]) -> Service | None:
    """The service a hand-written Agent's declaration was made for (``Service.agent_defn``)."""
    found = getattr(ref, SERVICE_ATTR, None)
    return found if isinstance(found, Service) else None


# ------------------------------------------------------------------ what goes into a body


@dataclass(frozen=True)
class Input:
    """A field of the task's input: ``Input("traveller")``, or a nested one, ``Input("trip.from")``."""

    path: str

    def __post_init__(self) -> None:
        if not self.path or any(not part.isidentifier() for part in self.path.split(".")):
            raise ValueError(f"Input({self.path!r}): name a field of the input, e.g. 'traveller' or 'trip.date'")


@dataclass(frozen=True)
class Result:
    """A field of an earlier step's result: ``Result("flight", "booking_id")``. In a forward
    call only: an undo gets its own step's result through [`Forward`][sas.api.Forward]."""

    step: str
    field: str


@dataclass(frozen=True)
class Forward:
    """In an undo: a field of its own forward step's result (``Forward("booking_id")``), the
    service's id of the effect to undo. When the forward answer never arrived (the attempt
    timed out, the workflow died), it is asked of the service's lookup by the forward key; if
    the service did nothing under that key, the undo is not sent: that answer voided the key at
    the service, so nothing ever will be done under it (docs/http-contract.md)."""

    field: str


@dataclass(frozen=True)
class Const:
    """A fixed value: ``Const("economy")``. Any JSON value."""

    value: Any


@dataclass(frozen=True)
class TaskId:
    """The task's id."""


@dataclass(frozen=True)
class ForwardKey:
    """In an undo: the idempotency key its forward call was sent with, by which the service
    can find the effect when no id is known."""


BodyValue = Input | Result | Forward | Const | TaskId | ForwardKey


@dataclass(frozen=True, eq=False)
class HttpCall:
    """A step's remote call, declared as data, run by sas's generic HTTP Agent.

    ``HttpCall(FLIGHTS, "POST", "/flights/book", body={"traveller": Input("traveller")},
    result=FlightBooked)`` sends ``{"traveller": ...}`` with the step's ``Idempotency-Key`` and
    validates the answer against ``FlightBooked``, which becomes the step's result. Everything a
    hand-written Agent does applies: the attempt's complete-by, transient and permanent errors,
    the service's bulkhead and breaker, heartbeats, the mirror writes and the checked client.

    Attributes:
        service: The service called.
        method: ``POST`` (the usual), ``PUT``, ``PATCH`` or ``DELETE``.
        path: The URL path under the service's ``SAS_SERVICES__<NAME>__URL``.
        result: The model of the answer (a ``StepResultModel``; ``Secret`` fields stay in the workflow).
        body: JSON field -> where its value comes from ([`Input`][sas.api.Input],
            [`Result`][sas.api.Result], [`Forward`][sas.api.Forward], [`Const`][sas.api.Const],
            [`TaskId`][sas.api.TaskId], [`ForwardKey`][sas.api.ForwardKey]).
        action: The activity's action name; default: the path's last segment, so
            ``/flights/book`` runs as the activity ``flights.book``.
    """

    service: Service
    method: Method
    path: str
    result: type[BaseModel]
    body: Mapping[str, BodyValue] = field(default_factory=dict)
    action: str | None = None

    def __post_init__(self) -> None:
        if self.method not in ("POST", "PUT", "PATCH", "DELETE"):
            raise ValueError(f"HttpCall {self.path}: method {self.method!r}: use POST, PUT, PATCH or DELETE")
        if not _PATH.fullmatch(self.path):
            raise ValueError(f"HttpCall {self.path!r}: the path must start with / (letters, digits, . _ ~ - /)")
        for key, value in self.body.items():
            if not isinstance(value, BodyValue):
                raise TypeError(
                    f"HttpCall {self.path}: body[{key!r}] = {value!r}: use Input, Result, Forward, Const, TaskId or ForwardKey"
                )
        _check_action(self.service.name, self.verb)
        object.__setattr__(self, "body", dict(self.body))
        register_result(self.name, self.result)

    @property
    def verb(self) -> str:
        """The action part of the activity name."""
        return self.action or self.path.rstrip("/").rsplit("/", 1)[-1].replace("-", "_")

    @property
    def name(self) -> str:
        """The activity name, ``<service>.<action>``: recorded in each task's plan and the mirror."""
        return f"{self.service.name}.{self.verb}"

    def build_body(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body this call sends for ``call``: each field from where it is declared to
        come. ``forward``: for an undo, its forward step's result (as completed by the lookup)."""
        return {key: _value(source, call, forward or call.forward_result or {}) for key, source in self.body.items()}

    def signature(self) -> tuple[Any, ...]:
        """What makes two declarations of one activity name the same call."""
        return (self.service, self.method, self.path, _model_id(self.result), tuple(sorted(self.body.items(), key=str)))


def _value(source: BodyValue, call: StepCall, forward: Mapping[str, Any]) -> Any:
    if isinstance(source, Input):
        value: Any = call.payload
        for part in source.path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value
    if isinstance(source, Result):
        return call.results.get(source.step, {}).get(source.field)
    if isinstance(source, Forward):
        return forward.get(source.field)
    if isinstance(source, Const):
        return source.value
    if isinstance(source, TaskId):
        return call.task_id
    return call.target_key  # ForwardKey


def _model_id(model: type[BaseModel]) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def _check_action(service: str, action: str) -> None:
    if not _ACTION.fullmatch(action):
        raise ValueError(
            f"{service}.{action}: an action is 1-40 characters from a-z 0-9 _ (give action=... for this path)"
        )
