"""A hand-written Agent, declared on its service: the function that does the work of one attempt
(``AgentFunction``), kept on the declaration a step names, which carries its service too.

``Service.action`` declares one (``@PAYMENT.action("charge", Charged) async def charge(call,
agent)``); ``Service.agent_defn`` the older, deprecated form, a method of a declarations class
implemented by the class the service names. The worker runs the function under the declaration's
activity name (``activities/function_agents.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from sas.task_models.activity_defs import AgentRef, agent_defn
from sas.task_models.steps import StepCall, StepResult
from sas.task_types.names import check_action

if TYPE_CHECKING:
    from sas.task_types.agent_context import AgentContext

F = TypeVar("F", bound=Callable[..., Any])
# The attribute a hand-written Agent's declaration carries its service in.
SERVICE_ATTR = "__sas_service__"
# The attribute an Agent declared with ``Service.action`` carries the function that does its work in.
AGENT_FUNCTION_ATTR = "__sas_agent_function__"
# The attribute it carries the earlier steps whose results it reads in (``Service.action(reads=)``).
READS_ATTR = "__sas_reads__"
# What ``Service.action`` decorates: the work of one attempt, given the step and its context.
AgentFunction = Callable[["StepCall", "AgentContext"], Awaitable["StepResult"]]


def declare_function(
    service: object, name: str, action: str, result: type[BaseModel], reads: Iterable[str] | None = None
) -> Callable[[AgentFunction], AgentRef]:
    """``Service.action``: the decorator that declares the Agent ``<name>.<action>`` of ``service``
    on the function that does its work."""
    check_action(name, action)
    if isinstance(reads, str):
        raise TypeError(f"{name}.{action}: reads= takes step names, as a tuple: reads=({reads!r},)")
    read = None if reads is None else frozenset(reads)
    declare = agent_defn(f"{name}.{action}", result)

    def decorate(work: AgentFunction) -> AgentRef:
        if not inspect.iscoroutinefunction(work):
            raise TypeError(f"{name}.{action}: the Agent {work.__qualname__} must be an async def")
        if len(inspect.signature(work).parameters) != 2:
            raise TypeError(
                f"{name}.{action}: the Agent {work.__qualname__} takes (call: StepCall, agent: AgentContext)"
            )

        async def declared(call: StepCall) -> StepResult:
            raise NotImplementedError(f"{name}.{action} runs on a worker, as an activity")

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(declared, attribute, getattr(work, attribute))
        ref = declare(declared)
        setattr(ref, SERVICE_ATTR, service)
        setattr(ref, AGENT_FUNCTION_ATTR, work)
        setattr(ref, READS_ATTR, read)
        return ref

    return decorate


def declare_method(service: object, name: str, action: str, result: type[BaseModel]) -> Callable[[F], F]:
    """``Service.agent_defn`` (deprecated): the decorator that declares the Agent ``<name>.<action>``
    of ``service`` as a method of a declarations class."""
    check_action(name, action)
    declare = agent_defn(f"{name}.{action}", result)

    def decorate(fn: F) -> F:
        declared = declare(fn)
        setattr(declared, SERVICE_ATTR, service)
        return declared

    return decorate


def agent_function(ref: Callable[..., Any]) -> AgentFunction | None:
    """The function that does the work of an Agent declared with ``Service.action``; None for
    the older form (implemented by the class its service names)."""
    return getattr(ref, AGENT_FUNCTION_ATTR, None)


def agent_reads(ref: Callable[..., Any]) -> frozenset[str] | None:
    """The earlier steps whose results an Agent declared with ``Service.action(reads=)`` reads;
    None: it was not told, so it is sent every earlier step's result."""
    return getattr(ref, READS_ATTR, None)


def older_form(service: str) -> str:
    """The one line a service of the older Agent form gets at load: what to move to."""
    return (
        f"service {service!r}: Service(agent=...) with agent_defn/implements is deprecated and goes in sas 1.0; "
        f'declare each Agent on its function instead: @{service.rpartition(".")[2].upper()}.action("<action>", Result) '
        "async def <action>(call, agent) (docs/task-types.md)"
    )
