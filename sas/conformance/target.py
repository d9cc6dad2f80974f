"""Which calls of a service the kit exercises, and the bodies it sends them.

Derived from the task types sas knows: every step whose forward call is declared as data
(``HttpCall``) on the service gives its declaration, its undo the same, and the service's
declaration its lookup path. A REST-shaped call (path parameters, declared query and headers, a
result picked out of a nested answer) is sent as sas's HTTP Agent sends it: the request is built
by the declaration itself (``HttpCall.request``) for a ``StepCall`` the kit makes up. A hand-written Agent's paths are in
its code, where sas cannot see them: for those, :class:`ExplicitCalls` says them, with a sample
body whose strings ``{task_id}``, ``{forward_key}`` and ``{forward.FIELD}`` stand for what sas
would send there.

Every key the kit sends is made up for the check: ``sas-check-<hex>:<step>``, its undo's
``sas-check-<hex>:<step>:undo``, the same shape as a task's (docs/http-contract.md).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from sas.task_models.steps import MirrorStamp, StepCall
from sas.task_types.discovery import Catalog
from sas.task_types.fan_out import ForEach
from sas.task_types.services import DEFAULT_LOOKUP, HttpCall, HttpRequest, named_service
from sas.task_types.sources import BodyValue, Const, Forward, ForwardKey, Input, Result, TaskId, value_of
from sas.task_types.steps import StepContext
from sas.task_types.task_definition import TaskDefinition

KEY_PREFIX = "sas-check-"
_FORWARD_FIELD = re.compile(r"\{forward\.([A-Za-z_][A-Za-z0-9_]*)\}")
_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")


class ServiceCheckError(Exception):
    """The check cannot run as asked (an unknown service, a URL that is not one, a service that
    does not answer, a body it cannot build). Its message is one line that says what to do;
    ``bad_input`` is set when what was asked is wrong, rather than the service out of reach."""

    def __init__(self, message: str, *, bad_input: bool = True) -> None:
        super().__init__(message)
        self.bad_input = bad_input


@dataclass(frozen=True)
class CallSpec:
    """One call the kit sends: method, path, body template and the model of a success;
    ``declared``: the step's declaration, which builds the request (None: said outright)."""

    method: str
    path: str
    body: Mapping[str, BodyValue]
    result: type[BaseModel] | None
    name: str
    declared: HttpCall | None = None

    def request(self, call: StepCall, forward: Mapping[str, Any] | None = None) -> HttpRequest:
        """What is sent for ``call``: as sas's HTTP Agent builds it for a declared call
        (UnsafeValue for a value that cannot go where it is declared to); a JSON body to a
        fixed path for calls said outright."""
        if self.declared is not None:
            return self.declared.request(call, forward)
        body = {key: value_of(source, call, forward or {}) for key, source in self.body.items()}
        return HttpRequest(self.method, self.path, body, {}, {})

    def result_of(self, answer: Any) -> Any:
        """The step's result in a successful answer: the declared ``pick``, as the Agent reads it."""
        if self.declared is not None and isinstance(answer, dict):
            return self.declared.picked(answer)
        return answer

    def takes_forward_in_path(self) -> bool:
        """An undo whose path names the effect (``DELETE /payments/{payment_id}``): it cannot be
        sent without the forward's answer, so sas asks the lookup first, as the Agent does."""
        return self.declared is not None and any(isinstance(v, Forward) for v in self.declared.params.values())


@dataclass(frozen=True)
class CheckTarget:
    """One step's calls on the service: its forward, its undo and the service's lookup.

    Attributes:
        step: The step's name, the last part of its keys.
        forward: The forward call.
        undo: Its undo; None for a step with nothing to undo.
        lookup: The lookup's path; None when the service declares none.
        payload: The task input the body's ``Input`` fields are taken from.
        refused_body: The forward's body template changed so that the service refuses it for
            good; None when no such change was given.
        refused_payload: The task input that refused body is rendered from.
        id_fields: The fields an undo names the effect by (its ``Forward`` fields): how a lookup's
            answer is compared with the forward's.
        task_type: The task type the step is of.
        item_key: For a step run for each item (``ForEach``): the sample item's key, the last
            part of its keys, as a task's.
        results: Made-up results of the earlier steps, for a body's ``Result`` fields.
    """

    step: str
    forward: CallSpec
    undo: CallSpec | None
    lookup: str | None
    payload: Mapping[str, Any] = field(default_factory=dict)
    refused_body: Mapping[str, BodyValue] | None = None
    refused_payload: Mapping[str, Any] = field(default_factory=dict)
    id_fields: tuple[str, ...] = ()
    task_type: str = "sas-check"
    item_key: str | None = None
    results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def key(self, task_id: str) -> str:
        """The forward's key in a task ``task_id``: ``<task>:<step>``, ``<task>:<step>:<item>``."""
        key = f"{task_id}:{self.step}"
        return key if self.item_key is None else f"{key}:{self.item_key}"

    def step_call(
        self,
        task_id: str,
        key: str,
        *,
        refusing: bool = False,
        undo: bool = False,
        forward: Mapping[str, Any] | None = None,
    ) -> StepCall:
        """The ``StepCall`` the Scheduler would give the Agent for this step in task ``task_id``
        under ``key`` (its undo: under ``<key>:undo``, ``forward`` its forward's result)."""
        return StepCall(
            task_id=task_id,
            task_type=self.task_type,
            step=self.step,
            position=0,
            idempotency_key=f"{key}:undo" if undo else key,
            target_key=key if undo else None,
            compensation=undo,
            payload=dict(self.refused_payload if refusing else self.payload),
            stamp=MirrorStamp(seq=0),
            results={step: dict(fields) for step, fields in self.results.items()},
            forward_result=dict(forward) if forward is not None else None,
            item_key=self.item_key,
        )

    def describe(self) -> str:
        """``flights.book: POST /flights/book, undo /flights/cancel, lookup /flights/lookup``
        (an undo's method is said when it is not POST: ``undo DELETE /payments/{payment_id}``)."""
        undo = "no undo"
        if self.undo is not None:
            method = "" if self.undo.method == "POST" else f"{self.undo.method} "
            undo = f"undo {method}{self.undo.path}"
        lookup = f"lookup {self.lookup}" if self.lookup else "no lookup"
        return f"{self.forward.name}: {self.forward.method} {self.forward.path}, {undo}, {lookup}"


@dataclass(frozen=True)
class ExplicitCalls:
    """A service's calls said outright, for a service whose Agents are hand-written.

    Attributes:
        forward: The forward call's path (``/cards/charge``).
        body: A body the service accepts for it. A string value ``"{task_id}"`` is replaced by
            the check's made-up task id, as ``TaskId()`` would be.
        undo: The undo's path; None: the step has no undo.
        undo_body: The undo's body: ``"{forward_key}"`` is the forward call's key (as
            ``ForwardKey()``), ``"{forward.FIELD}"`` that field of the forward's answer (as
            ``Forward("FIELD")``: null when nothing was done), ``"{task_id}"`` as above.
        lookup: The lookup's path; default: the service's declared one, else
            ``/<service>/lookup``. None: the service has no lookup.
        method: The forward's and the undo's HTTP method.
    """

    forward: str
    body: Mapping[str, Any]
    undo: str | None = None
    undo_body: Mapping[str, Any] | None = None
    lookup: str | None = DEFAULT_LOOKUP
    method: str = "POST"


def new_task_id() -> str:
    """A task id no real task has: the kit's own keys start with it."""
    return f"{KEY_PREFIX}{uuid.uuid4().hex[:16]}"


def derived_targets(
    name: str,
    catalog: Catalog,
    sample_input: Mapping[str, Any] | None,
    refusing: Mapping[str, Any] | None,
) -> list[CheckTarget]:
    """The targets of service ``name`` from the registered task types: one per step whose
    forward call is declared as data, each distinct forward call once."""
    service = catalog.services.get(name)
    if service is None:
        known = ", ".join(sorted(catalog.services)) or "none"
        raise ServiceCheckError(f"no registered task type calls a service named {name!r} (known: {known})")
    targets: dict[str, CheckTarget] = {}
    for found in catalog.types.values():
        definition = found.definition
        for step in definition.steps:
            forward = getattr(step, "forward", None)
            if not isinstance(forward, HttpCall) or forward.service.name != name or forward.name in targets:
                continue
            _known_standalone(forward)
            undo = getattr(step, "undo", None)
            undo = undo if isinstance(undo, HttpCall) else None
            used = [v.path for part in forward.sources().values() for v in part.values() if isinstance(v, Input)]
            task_input = _sample(definition.input_model, sample_input, used, forward.name)
            payload, item_key = _item(definition, step, task_input)
            refused: dict[str, Any] | None = None
            if refusing:
                refused_input = _sample(definition.input_model, {**task_input, **refusing}, used, forward.name)
                refused = _item(definition, step, refused_input)[0]
            targets[forward.name] = CheckTarget(
                step=step.name,
                forward=_spec(forward),
                undo=_spec(undo) if undo is not None else None,
                lookup=service.lookup_path,
                payload=payload,
                refused_body=dict(forward.body) if refused is not None else None,
                refused_payload=refused or {},
                id_fields=tuple(
                    v.field
                    for part in (undo.sources().values() if undo is not None else ())
                    for v in part.values()
                    if isinstance(v, Forward)
                ),
                task_type=definition.task_type,
                item_key=item_key,
                results={
                    v.step: {v.field: f"{KEY_PREFIX}{v.step}-{v.field}"}
                    for v in forward.body.values()
                    if isinstance(v, Result)
                },
            )
    if not targets:
        written = ", ".join(catalog.hand_written(name)) or "none declared as data"
        raise ServiceCheckError(
            f"service {name!r} is called by hand-written Agents only ({written}), which the"
            " kit does not derive: say them with --forward PATH --undo PATH --body-json JSON (ExplicitCalls)"
        )
    return list(targets.values())


def _known_standalone(call: HttpCall) -> None:
    """An earlier step's result in the path, query or headers cannot be made up: it names
    something at the service that only that step made. (In a body, a made-up value is sent.)"""
    for part, sources in call.sources().items():
        if part == "body":
            continue
        for key, source in sources.items():
            if isinstance(source, Result):
                raise ServiceCheckError(
                    f"{call.name}: {part} {key!r} is step {source.step}'s {source.field}, which the kit cannot know"
                    f" without running that step: check {call.name} with --forward PATH --body-json JSON"
                    " (ExplicitCalls), the path filled with a real one"
                )


def _item(definition: TaskDefinition, step: Any, task_input: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A step's payload for a task input: the input, or for a ``ForEach`` its first item (the
    item is what its calls read), with that item's key."""
    if not isinstance(step, ForEach):
        return dict(task_input), None
    try:
        items = step.items(StepContext(input=task_input, results={}))
    except (LookupError, TypeError, ValueError) as err:  # a team's function, over a sample input
        raise ServiceCheckError(
            f"{definition.task_type}.{step.name}'s items could not be read from the sample input:"
            f" {type(err).__name__}: {str(err)[:120]}"
        ) from None
    if not items:
        raise ServiceCheckError(f"{definition.task_type}.{step.name} has no item for the sample input: give one")
    first = dict(items[0])
    return first, str(step.key(first))


def explicit_target(
    name: str, calls: ExplicitCalls, catalog: Catalog | None, refusing: Mapping[str, Any] | None
) -> CheckTarget:
    """The one target :class:`ExplicitCalls` says; its result models are those of the service's
    hand-written Agents named like the paths' last parts (``/cards/charge``: ``cards.charge``)."""
    service = catalog.services.get(name) if catalog is not None else None
    # The service is called by its own name at its URL, a team's without its team.
    short = (service or named_service(name)).short_name
    for path in (calls.forward, calls.undo, calls.lookup and calls.lookup.replace("{service}", short)):
        if path is not None and not _PATH.fullmatch(path):
            raise ServiceCheckError(f"{path!r} is not a URL path: start it with / (letters, digits, . _ ~ - /)")
    if calls.method not in ("POST", "PUT", "PATCH", "DELETE"):
        raise ServiceCheckError(f"method {calls.method!r}: use POST, PUT, PATCH or DELETE")
    lookup = calls.lookup
    if lookup == DEFAULT_LOOKUP:
        lookup = (service or named_service(name)).lookup_path
    elif lookup is not None:
        lookup = lookup.replace("{service}", short)
    undo_template = _template(calls.undo_body or {}) if calls.undo is not None else {}
    forward = CallSpec(calls.method, calls.forward, _template(calls.body), None, _call_name(name, calls.forward))
    return CheckTarget(
        step=forward.name.rpartition(".")[2],
        forward=replace(forward, result=_result_of(forward.name)),
        undo=None
        if calls.undo is None
        else CallSpec(
            calls.method,
            calls.undo,
            undo_template,
            _result_of(_call_name(name, calls.undo)),
            _call_name(name, calls.undo),
        ),
        lookup=lookup,
        refused_body=_template({**calls.body, **refusing}) if refusing else None,
        id_fields=tuple(v.field for v in undo_template.values() if isinstance(v, Forward)),
    )


def _spec(call: HttpCall) -> CallSpec:
    return CallSpec(call.method, call.path, dict(call.body), call.result, call.name, declared=call)


def _template(body: Mapping[str, Any]) -> dict[str, BodyValue]:
    """A sample body as a template: the placeholders become what they stand for."""
    template: dict[str, BodyValue] = {}
    for key, value in body.items():
        forward = _FORWARD_FIELD.fullmatch(value) if isinstance(value, str) else None
        if value == "{task_id}":
            template[key] = TaskId()
        elif value == "{forward_key}":
            template[key] = ForwardKey()
        elif forward is not None:
            template[key] = Forward(forward.group(1))
        else:
            template[key] = Const(value)
    return template


def _call_name(service: str, path: str) -> str:
    action = path.rstrip("/").rsplit("/", 1)[-1].replace("-", "_") or "call"
    return f"{service}.{action}"


def _result_of(name: str) -> type[BaseModel] | None:
    from sas.task_models.activity_defs import agent_result

    return agent_result(name)


def _sample(model: type[BaseModel], given: Mapping[str, Any] | None, used: list[str], call: str) -> dict[str, Any]:
    """A task input for the body's ``Input`` fields: the one given, checked against the task
    type's input model as ``sas submit`` would, else the model's defaults."""
    if not used:
        return dict(given or {})
    try:
        return model.model_validate(dict(given or {})).model_dump(mode="json")
    except ValidationError as err:
        if given is None:
            raise ServiceCheckError(
                f"{call} takes {', '.join(used)} from the task input ({model.__name__}): give a sample"
                " input with --input-json (check_service(sample_input=...))"
            ) from None
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        raise ServiceCheckError(f"the sample input is not a valid {model.__name__}: {where}: {first['msg']}") from None
