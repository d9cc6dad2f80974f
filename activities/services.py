"""The Agents this process runs: one set per remote service that the registered task types call.

For each service (``sas/task_types/discovery.py`` finds them through the task types' steps):

- its Agents declared as functions (``Service.action``): each run as its own activity by
  ``FunctionAgents``, on the service's caller;
- its hand-written Agents of the older form: the class its ``Service(agent="package.module:Class")``
  names, built with the service's caller, the mirror's writer and the worker's identity;
- its calls declared as data (``HttpCall``): sas's generic ``HttpAgent``, on the same caller.

``AGENTS`` maps each service's name to what builds them. It is read on first use, not at
import, so a task type registered by an entry point or ``SAS_TASK_TYPES__MODULES`` is never
missed; every step's Agent must have an implementation, or the worker stops with one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sas.activities.agent import Agent
from sas.activities.function_agents import FunctionAgents, function_agent_refs
from sas.activities.http_agent import HttpAgent
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.state_store.agent_writes.writer import StepWriter
from sas.task_models.activity_defs import AgentRef
from sas.task_models.sdk_internals import activity_name_of
from sas.task_types.discovery import Catalog, TaskTypeError, discover
from sas.task_types.services import HttpCall, Service


@dataclass(frozen=True)
class ServiceAgents:
    """One service's Agents: its hand-written class, if any, and its calls declared as data."""

    service: Service
    agent_class: type[Agent] | None
    calls: tuple[HttpCall, ...]
    functions: tuple[AgentRef, ...] = ()

    def build(
        self, remote: RemoteCaller, writer: StepWriter, identity: str, refused: RefusedWrites
    ) -> list[Callable[..., Any]]:
        """The service's activities, with their dependencies injected."""
        found: list[Callable[..., Any]] = []
        if self.agent_class is not None:
            found += activity_methods(self.agent_class(remote, writer, identity, refused, self.service))
        if self.calls:
            found += HttpAgent(remote, writer, identity, refused).activities(self.calls)
        if self.functions:
            found += FunctionAgents(remote, writer, identity, refused).activities(self.functions)
        return found


def service_agents(catalog: Catalog) -> dict[str, ServiceAgents]:
    """Each service of ``catalog`` with its Agents; TaskTypeError (one line) if a step's Agent
    has no implementation or a service's Agent class cannot be loaded."""
    found = {}
    for name, service in sorted(catalog.services.items()):
        refs = [catalog.agents[a] for a in catalog.hand_written(name)]
        functions = function_agent_refs(r for r in refs if not isinstance(r, HttpCall))
        hand_written = [a for a in catalog.hand_written(name) if catalog.agents[a] not in functions]
        path = service.agent
        agent_class = _load(name, path) if hand_written and path else None
        implemented = set() if agent_class is None else {_name(m) for m in activity_methods(agent_class)}
        missing = [a for a in hand_written if a not in implemented]
        if missing:
            where = (
                f"{path} has no @implements for it"
                if agent_class
                else f'declare it with @{name.rpartition(".")[2].upper()}.action("{missing[0].rpartition(".")[2]}", ...) on its function'
            )
            raise TaskTypeError(f"service {name!r}: Agent {missing[0]!r} has no implementation: {where}")
        found[name] = ServiceAgents(service, agent_class, tuple(catalog.http_calls(name)), tuple(functions))
    return found


def _load(service: str, path: str) -> type[Agent]:
    module, _, attr = path.partition(":")
    try:
        value = getattr(importlib.import_module(module), attr)
    except Exception as err:  # whatever the import raises, the line names it
        raise TaskTypeError(
            f"service {service!r}: its Agent class {path!r} cannot be loaded: {type(err).__name__}: {err}"
        ) from err
    if not (isinstance(value, type) and issubclass(value, Agent)):
        raise TaskTypeError(f"service {service!r}: {path!r} is not a subclass of sas.api.agent_class.Agent")
    return value


def activity_methods(agent: object) -> list[Callable[..., Any]]:
    """The activity methods of an Agent (its forward actions and undos): bound for an instance."""
    cls = agent if isinstance(agent, type) else type(agent)
    found = []
    for name in sorted(dir(cls)):
        if activity_name_of(getattr(cls, name)) is not None:
            found.append(getattr(agent, name))
    return found


def _name(fn: Callable[..., Any]) -> str | None:
    return activity_name_of(fn)


@cache
def _registered(modules: tuple[str, ...], only: tuple[str, ...]) -> dict[str, ServiceAgents]:
    return service_agents(discover(modules, only=only))


def registered_agents() -> dict[str, ServiceAgents]:
    """The services of the registered task types (entry points and ``SAS_TASK_TYPES__MODULES``)."""
    from sas.settings import get_settings

    settings = get_settings().task_types
    return _registered(tuple(settings.modules), tuple(settings.run))


def forget() -> None:
    """Forget the services found (``sas.workflows.registry.refresh``)."""
    _registered.cache_clear()


class _Registered(Mapping[str, ServiceAgents]):
    """``registered_agents()``, read when first looked at."""

    def __getitem__(self, name: str) -> ServiceAgents:
        return registered_agents()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registered_agents())

    def __len__(self) -> int:
        return len(registered_agents())

    def __repr__(self) -> str:
        return f"AGENTS({', '.join(self)})"


# Service name -> its Agents, for every service of the registered task types.
AGENTS: Mapping[str, ServiceAgents] = _Registered()
