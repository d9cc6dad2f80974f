"""The settings reference, generated from ``sas/settings/``: every environment variable, its
type, default, bounds and description, so the docs cannot drift from the code.

mkdocs runs this module as a hook (``mkdocs.yml``): in ``docs/configuration.md`` the line
``<!-- settings-reference -->`` becomes the reference. ``python docs/hooks/settings_reference.py``
prints it. ``tests/test_docs.py`` fails when a setting has no description or a group no docstring.

Everything comes from the pydantic models: a field's ``description``, its declared default (for
a group given as a default instance, such as ``compensation``, that instance's values), and the
``ge``/``gt``/``le``/``lt``/length constraints. A group is a nested model; a map of models
(``steps``, ``supervisor.ladders``, the named services) is a group under a placeholder key.
"""

from __future__ import annotations

import html
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import annotated_types
from pydantic import BaseModel, SecretStr

MARKER = "<!-- settings-reference -->"

# The key a map of groups is addressed by, named in the variable: SAS_STEPS__<STEP>__COMPLETE_BY_S.
PLACEHOLDERS = {"steps": "STEP", "ladders": "TYPE"}
# Maps whose entries override the group above them: a field left unset there is inherited, so the
# reference says "unset" rather than the model's own default (a task type's ladder is a Ladder).
OVERRIDES = {"ladders"}
# ServicesSettings takes any other key as a service's own settings (its __pydantic_extra__).
EXTRA_PLACEHOLDER = "NAME"


@dataclass(frozen=True)
class Setting:
    """One environment variable."""

    variable: str
    type: str
    default: str
    bounds: str
    description: str


@dataclass(frozen=True)
class Group:
    """The variables of one model, under one prefix (``SAS_SUPERVISOR__``)."""

    prefix: str
    model: type[BaseModel]
    doc: str
    settings: tuple[Setting, ...]


def _clean(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split())


def _own_doc(model: type[BaseModel]) -> str:
    # pydantic gives every model BaseModel's docstring when it has none of its own.
    return _clean(model.__doc__) if model.__doc__ and model.__doc__ is not BaseModel.__doc__ else ""


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    annotation = _without_none(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _map_of_models(annotation: Any) -> type[BaseModel] | None:
    annotation = _without_none(annotation)
    if typing.get_origin(annotation) is dict:
        _, value = typing.get_args(annotation)
        return _model_of(value)
    return None


def type_name(annotation: Any) -> str:
    """The type as an operator writes it in the variable."""
    annotation = _without_none(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        return f"JSON list of {type_name(item)}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"JSON object, {type_name(key)} → {type_name(value)}"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " or ".join(f"`{m.value}`" for m in annotation)
    return getattr(annotation, "__name__", str(annotation))


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


# Each kind of constraint, the attribute holding its limit, and how the reference writes it.
_BOUNDS: tuple[tuple[type, str, str], ...] = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", "≥ {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "≤ {}"),
    (annotated_types.MinLen, "min_length", "at least {} characters"),
    (annotated_types.MaxLen, "max_length", "at most {} characters"),
)


def bounds(metadata: list[Any]) -> str:
    """The field's constraints: ``> 0, ≤ 3,600``; empty when it has none."""
    shown = [
        shape.format(_number(getattr(item, limit)))
        for item in metadata
        for kind, limit, shape in _BOUNDS
        if isinstance(item, kind)
    ]
    return ", ".join(shown)


def _extra_model(model: type[BaseModel]) -> type[BaseModel] | None:
    """The model of a group's free keys (``ServicesSettings``: each service by name)."""
    if model.model_config.get("extra") != "allow":
        return None
    hints = typing.get_type_hints(model, vars(sys.modules[model.__module__]))
    return _map_of_models(hints.get("__pydantic_extra__"))


def groups(
    model: type[BaseModel], prefix: str = "SAS_", defaults: BaseModel | None = None, inherited: bool = False
) -> Iterator[Group]:
    """Every group of settings under ``model``, depth first, each after its parent; ``inherited``:
    every field is an override, unset unless given."""
    defaults = defaults if defaults is not None else model.model_construct()
    settings, nested = [], []
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        child = _model_of(field.annotation)
        mapped = _map_of_models(field.annotation)
        if child is not None:
            nested.append((child, f"{variable}__", getattr(defaults, name), field.description, inherited))
        elif mapped is not None:
            key = PLACEHOLDERS.get(name, "KEY")
            entry = (mapped, f"{variable}__<{key}>__", mapped.model_construct(), field.description)
            nested.append((*entry, inherited or name in OVERRIDES))
        else:
            settings.append(
                Setting(
                    variable=variable,
                    type=type_name(field.annotation),
                    default="unset" if inherited else _value(getattr(defaults, name)),
                    bounds=bounds(field.metadata),
                    description=_clean(field.description),
                )
            )
    extra = _extra_model(model)
    if extra is not None:
        nested.insert(0, (extra, f"{prefix}<{EXTRA_PLACEHOLDER}>__", extra.model_construct(), None, inherited))
    yield Group(prefix=prefix, model=model, doc=_own_doc(model), settings=tuple(settings))
    for child, child_prefix, child_defaults, description, child_inherited in nested:
        for group in groups(child, child_prefix, child_defaults, child_inherited):
            if group.prefix == child_prefix and description:
                group = Group(group.prefix, group.model, _clean(f"{description} {group.doc}"), group.settings)
            yield group


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# A variable named in running text, shown as code: SAS_SERVICES__URL, OTEL_EXPORTER_OTLP_*.
_VARIABLE = re.compile(r"\b(?:SAS|OTEL|PG)[A-Z0-9_]*(?:<[A-Z]+>[A-Z0-9_]*)*\*?")


def _prose(text: str) -> str:
    """Descriptions as markdown: reST's ``x`` as `x`, variables as code, and no ``<``
    (``whsec_<base64>``) taken for an HTML tag."""
    parts = re.sub(r"``([^`]+)``", r"`\1`", text).split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        plain = _VARIABLE.sub(lambda m: f"\x00{m.group(0)}\x00", parts[i])
        plain = plain.replace("<", "&lt;").replace(">", "&gt;")
        parts[i] = re.sub("\x00(.*?)\x00", lambda m: f"`{html.unescape(m.group(1))}`", plain)
    return "`".join(parts)


def render(model: type[BaseModel] | None = None) -> str:
    """The reference as markdown: one section per group, one table row per variable."""
    if model is None:
        from sas.settings import Settings

        model = Settings
    out = []
    for group in groups(model):
        if not group.settings:
            continue
        out += [f"### `{group.prefix}*`", ""]
        if group.doc:
            out += [_prose(group.doc), ""]
        out += ["| variable | type | default | bounds | description |", "| --- | --- | --- | --- | --- |"]
        for s in group.settings:
            cells = [f"`{s.variable}`", s.type, s.default, s.bounds or "–", _prose(s.description)]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: the marker in a page becomes the reference."""
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown


if __name__ == "__main__":
    print(render())
