"""Finding the task types: the modules that installed packages name in the ``sas.task_types``
entry point group, and those the ``SAS_TASK_TYPES__MODULES`` setting names.

A team's package names its module in its ``pyproject.toml``::

    [project.entry-points."sas.task_types"]
    trip = "sas_trip.workflows"

In each such module, every ``@workflow.defn`` class with a ``definition`` (a ``TaskDefinition``)
is a task type. The module is imported once per process, and again inside the workflow sandbox
for each run: it must be safe to import there (no I/O, nothing heavy at import; its Agents'
code lives in another module, named by ``Service(agent=...)``).

What cannot work stops the worker, and every command that needs the types, with one line that
names the module and the problem (:class:`TaskTypeError`): a module that fails to import or
declares no task type, two task types (or workflow types) of one name, a workflow or Agent named
like one of sas's own (:data:`RESERVED_WORKFLOWS`, :data:`RESERVED_SERVICES`), a task type named like a
service, one Agent name declared as two different calls, an undo on another service than its
step, a body field taken from where it cannot come, or a definition that breaks one of its own
rules (``sas/task_types/checks.py``: a step with an effect and no undo, a misplaced pivot, ...).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from sas.task_models.ids import service_settings
from sas.task_models.queues import service_of
from sas.task_models.sdk_internals import workflow_name_of
from sas.task_types.call_checks import calls_problem
from sas.task_types.checks import children_problem, definition_problem
from sas.task_types.services import HttpCall, Service, named_service, service_of_ref
from sas.task_types.steps import AgentCall, StepDefinition
from sas.task_types.task_definition import TaskDefinition

ENTRY_POINT_GROUP = "sas.task_types"
"""The entry point group in which a package names its task type modules (``pyproject.toml``:
``[project.entry-points."sas.task_types"]``, ``signup = "my_team.signup"``)."""


# sas's own activities and workflows share the worker with every task type's (the Scheduler's
# state-store writes and status posts, the Supervisor's sweeps, the clean-up after a closed task):
# a task type's Agent or workflow of one of these names would register twice and stop the worker.
# An Agent's activity name is <service>.<action>, so the services are kept whole.
RESERVED_SERVICES = ("mirror", "callback", "cleanup", "supervisor", "child")
"""Service names a task type may not use: sas's own activities are ``mirror.*``, ``callback.*``,
``cleanup.*`` and ``supervisor.*``; ``child.<type>`` is what the plan records for a child step."""
RESERVED_WORKFLOWS = ("CleanupWorkflow", "SupervisorWorkflow", "FanOutBatch")
"""Workflow type names a task type may not use: sas's own workflows."""


class TaskTypeError(Exception):
    """A task type registration that cannot work. Its message is one line that names the
    module and the problem; the worker and the ``sas`` command stop with it."""


@dataclass(frozen=True)
class ModuleSource:
    """Where sas heard of a task type module: an entry point or the setting."""

    module: str
    origin: str


@dataclass(frozen=True)
class FoundType:
    """A registered task type: its definition, its workflow class and the module declaring them."""

    definition: TaskDefinition
    workflow: type
    module: str

    @property
    def name(self) -> str:
        return self.definition.task_type

    @property
    def workflow_name(self) -> str:
        """The workflow type name Temporal knows it by."""
        name = workflow_name_of(self.workflow)
        assert name is not None  # a task type's workflow is never dynamic
        return name


@dataclass(frozen=True)
class Catalog:
    """Every registered task type, the services their steps call and their Agents.

    Attributes:
        types: Task type name -> the type.
        services: Service name -> its declaration (a bare ``Service(name)`` for one reached only
            through plain ``agent_defn`` declarations).
        agents: Activity name -> its declaration (an ``HttpCall`` or a hand-written Agent's).
        sources: The modules searched, and where each was named.
        broken: Only when discovered ``lenient`` (``sas types``): each task type (or module) that
            cannot work, by name, with the one line that says why; it is left out of ``types``.
    """

    types: dict[str, FoundType]
    services: dict[str, Service]
    agents: dict[str, AgentCall]
    sources: tuple[ModuleSource, ...]
    broken: dict[str, str] = field(default_factory=dict)

    def by_workflow_name(self, name: str) -> FoundType | None:
        return next((t for t in self.types.values() if t.workflow_name == name), None)

    def http_calls(self, service: str) -> list[HttpCall]:
        """The service's calls declared as data, each once."""
        return [a for a in self.agents.values() if isinstance(a, HttpCall) and a.service.name == service]

    def hand_written(self, service: str) -> list[str]:
        """The activity names of the service's hand-written Agents."""
        return [n for n, a in self.agents.items() if not isinstance(a, HttpCall) and service_of(n) == service]


def module_sources(modules: Sequence[str] = ()) -> list[ModuleSource]:
    """The task type modules: the entry points' first, then the setting's, each once."""
    found: dict[str, ModuleSource] = {}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.value, p.name)):
        dist = point.dist
        where = f"entry point {point.name!r}" + (f" of {dist.name} {dist.version}" if dist is not None else "")
        module = point.value.partition(":")[0].strip()
        found.setdefault(module, ModuleSource(module, where))
    for module in modules:
        found.setdefault(module, ModuleSource(module, "SAS_TASK_TYPES__MODULES"))
    return list(found.values())


@functools.cache
def discover(modules: tuple[str, ...] = (), *, lenient: bool = False, only: tuple[str, ...] = ()) -> Catalog:
    """Import every task type module (``module_sources``) and check what they declare.

    Args:
        modules: Module names from ``SAS_TASK_TYPES__MODULES``, beside the entry points.
        lenient: Leave out a module that cannot be imported and a type whose own definition is
            wrong, each recorded in ``Catalog.broken`` with its line, instead of raising (for
            ``sas types``, which shows them as broken; the worker never runs lenient).
        only: The task types this process runs (``SAS_TASK_TYPES__RUN``); empty: every one.
            Another package that is broken is then left out, as lenient does, and does not stop
            the process; a type named here that is not found (its own module broken) does.

    Raises:
        TaskTypeError: one line naming the module and what is wrong with it.
    """
    sources = tuple(module_sources(modules))
    types: dict[str, FoundType] = {}
    workflow_names: dict[str, FoundType] = {}
    broken: dict[str, str] = {}
    tolerant = lenient or bool(only)
    for source in sources:
        try:
            module = _import(source)
        except TaskTypeError as err:
            if not tolerant:
                raise
            broken[source.module] = str(err)
            continue
        for found in _types_in(source, module, broken if tolerant else None):
            if only and not runs(found.name, only):
                continue
            earlier = types.get(found.name)
            if earlier is not None and earlier.workflow is not found.workflow:
                raise TaskTypeError(
                    f"task type {found.name!r} is declared twice: by {earlier.module} and by {found.module}"
                    f" ({source.origin}); rename one"
                )
            other = workflow_names.get(found.workflow_name)
            if other is not None and other.workflow is not found.workflow:
                raise TaskTypeError(
                    f"{found.module}: workflow type {found.workflow_name!r} of task type {found.name!r} is already"
                    f" task type {other.name!r}'s ({other.module}); give it its own name"
                )
            types[found.name] = workflow_names[found.workflow_name] = found
    missing = [name for name in only if not any(runs(found, (name,)) for found in types)]
    if missing and not lenient:
        why = "; ".join(broken.get(name) or line for name, line in broken.items()) or "no package declares it"
        raise TaskTypeError(f"SAS_TASK_TYPES__RUN names task type {missing[0]!r}, which is not found: {why}")
    _check_children(types, broken if tolerant else None)
    agents, services = _agents(types.values())
    for found in types.values():
        _refuse_reserved(found)
        if found.name in services:
            raise TaskTypeError(
                f"{found.module}: task type {found.name!r} has the name of a service its Agents call"
                f" ({service_settings(found.name)}__*, queue *.{found.name}); rename the task type"
            )
        if found.workflow_name in agents:
            raise TaskTypeError(
                f"{found.module}: workflow type {found.workflow_name!r} has the name of an Agent; rename the workflow"
            )
    return Catalog(types, services, agents, sources, broken)


def runs(task_type: str, only: Sequence[str]) -> bool:
    """Whether ``SAS_TASK_TYPES__RUN`` (``only``) names the task type: by its name, or all of its
    team's as ``<team>.*``."""
    team, dot, _ = task_type.rpartition(".")
    return task_type in only or (bool(dot) and f"{team}.*" in only)


def _check_children(types: dict[str, FoundType], broken: dict[str, str] | None) -> None:
    """Each type's child steps against the registered types (``checks.children_problem``); with
    ``broken``, a type whose children cannot run goes there instead (and out of ``types``)."""
    registered = {name: (t.definition, t.workflow_name) for name, t in types.items()}
    for name, found in list(types.items()):
        problem = children_problem(found.definition, registered)
        if problem is None:
            continue
        line = f"{found.module}: task type {name!r}: {problem}"
        if broken is None:
            raise TaskTypeError(line)
        broken[name] = line
        del types[name]


def _refuse_reserved(found: FoundType) -> None:
    where = f"{found.module}: task type {found.name!r}"
    if found.definition.team in RESERVED_SERVICES:
        # Its names would begin as sas's own activities do (child.<type>, mirror.*).
        raise TaskTypeError(
            f"{where}: team {found.definition.team!r} is the name of sas's own activities"
            f" ({', '.join(RESERVED_SERVICES)}); give the team another name"
        )
    if found.workflow_name in RESERVED_WORKFLOWS:
        raise TaskTypeError(
            f"{where}: workflow type {found.workflow_name!r} is the name of sas's own workflow"
            f" ({', '.join(RESERVED_WORKFLOWS)} are sas's); give the workflow another name"
        )
    for step in found.definition.steps:
        if not isinstance(step, StepDefinition):
            continue
        for name in (step.agent, step.compensation):
            if name is not None and service_of(name) in RESERVED_SERVICES:
                raise TaskTypeError(
                    f"{where}: Agent {name!r} of step {step.name!r} is on service {service_of(name)!r}, whose"
                    f" activities are sas's own ({', '.join(f'{r}.*' for r in RESERVED_SERVICES)});"
                    " give the service another name"
                )


def _import(source: ModuleSource) -> ModuleType:
    try:
        return importlib.import_module(source.module)
    except Exception as err:  # whatever a module raises, the line names it
        raise TaskTypeError(
            f"task type module {source.module!r} ({source.origin}) cannot be imported: {type(err).__name__}: {err}"
        ) from err


def _types_in(source: ModuleSource, module: ModuleType, broken: dict[str, str] | None = None) -> list[FoundType]:
    """The module's task types; with ``broken``, one whose definition is wrong goes there instead."""
    found = []
    refused = 0
    for value in list(vars(module).values()):
        if not isinstance(value, type) or value.__module__ != module.__name__:
            continue
        cls: type = value
        definition = getattr(value, "definition", None)
        if not isinstance(definition, TaskDefinition) or workflow_name_of(value) is None:
            continue
        if getattr(module, value.__name__, None) is not value:
            # The sandbox imports a workflow class by its own name from its module.
            raise TaskTypeError(
                f"{module.__name__}: the workflow class of task type {definition.task_type!r} is named"
                f" {value.__name__!r} but not bound to that name in its module; the workflow sandbox"
                f" imports it by that name (write `{value.__name__} = task_workflow(...)`)"
            )
        try:
            _check_definition(module.__name__, definition)
        except TaskTypeError as err:
            if broken is None:
                raise
            broken[definition.task_type] = str(err)
            refused += 1
            continue
        found.append(FoundType(definition, cls, module.__name__))
    if not found and not refused:
        raise TaskTypeError(
            f"task type module {source.module!r} ({source.origin}) declares no task type: no @workflow.defn"
            " class with a TaskDefinition as its `definition` (see sas.api.task_workflow)"
        )
    return found


def _check_definition(module: str, definition: TaskDefinition) -> None:
    """The definition's own rules (``sas/task_types/checks.py``), every call of a step on one
    service, and every value a call sends from where it can come (``call_checks.py``)."""
    problem = definition_problem(definition) or calls_problem(definition)
    if problem:
        raise TaskTypeError(f"{module}: task type {definition.task_type!r}: {problem}")


def _agents(types: Iterable[FoundType]) -> tuple[dict[str, AgentCall], dict[str, Service]]:
    """Every Agent by activity name, and every service by name; the same name declared as two
    different calls is refused."""
    agents: dict[str, AgentCall] = {}
    owners: dict[str, str] = {}
    services: dict[str, Service] = {}
    declared_by: dict[str, tuple[Service, FoundType]] = {}
    for found in types:
        for step in found.definition.steps:
            if not isinstance(step, StepDefinition):
                continue
            for call, name in ((step.forward, step.agent), (step.undo, step.compensation)):
                if call is None or name is None:
                    continue
                declared = call.service if isinstance(call, HttpCall) else service_of_ref(call)
                if declared is not None:
                    _one_package(declared_by, declared, found)
                known = agents.get(name)
                if known is not None and not _same(known, call):
                    raise TaskTypeError(
                        f"{found.module}: Agent {name!r} of task type {found.name!r} is declared differently by"
                        f" {owners[name]}; give one of them another action name"
                    )
                agents.setdefault(name, call)
                owners.setdefault(name, f"task type {found.name!r} ({found.module})")
                service = call.service if isinstance(call, HttpCall) else service_of_ref(call)
                service = service or named_service(service_of(name))
                if service.team is not None and service.team != found.definition.team:
                    raise TaskTypeError(
                        f"{found.module}: task type {found.name!r} calls {name!r} on service {service.name!r},"
                        f" team {service.team}'s own: only that team's task types may call it (a service"
                        " several teams call is declared without a team)"
                    )
                _add_service(services, service, found)
    return agents, services


def _one_package(declared_by: dict[str, tuple[Service, FoundType]], service: Service, found: FoundType) -> None:
    """A service name is one service, with one URL and one breaker: two packages that each
    declare a service of that name are refused, naming both (two teams that each want their own
    ``flights`` name their team on it: ``north.flights``). A package that uses another's service
    imports its ``Service``, and is then its user, not a second declarer."""
    first = declared_by.setdefault(service.name, (service, found))
    if first[0] is service:
        return
    package, other = found.module.partition(".")[0], first[1].module.partition(".")[0]
    if package == other:
        return  # one team's package, declaring it twice (the same or not: _add_service says)
    raise TaskTypeError(
        f"{found.module}: service {service.name!r} is declared by two packages, {other} (task type"
        f" {first[1].name!r}, {first[1].module}) and {package} (task type {found.name!r}); a service name is"
        f" one service, with one {service_settings(service.name)}__URL: rename one of them, or declare it"
        " once in one package and import it in the other"
    )


def _add_service(services: dict[str, Service], service: Service, found: FoundType) -> None:
    known = services.get(service.name)
    if known is None or known == service:
        services[service.name] = service
        return
    # A bare declaration (reached through a plain agent_defn) gives way to a full one.
    if known == named_service(known.name):
        services[service.name] = service
    elif service != named_service(service.name):
        raise TaskTypeError(
            f"{found.module}: service {service.name!r} of task type {found.name!r} is declared twice, differently"
            f" ({known!r} and {service!r}); declare it once and import it"
        )


def _same(a: AgentCall, b: AgentCall) -> bool:
    if isinstance(a, HttpCall) and isinstance(b, HttpCall):
        return a.signature() == b.signature()
    if isinstance(a, HttpCall) or isinstance(b, HttpCall):
        return False
    return a is b or _qualified(a) == _qualified(b)


def _qualified(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
