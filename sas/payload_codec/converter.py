"""The data converter every sas client and worker uses: pydantic JSON, lean in the history, its
large payloads compressed, encrypted when keys are configured."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import temporalio.api.common.v1
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_json
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)

from sas.payload_codec.codec import EncryptionCodec
from sas.payload_codec.compression import CodecChain, CompressionCodec
from sas.payload_codec.keys import KeyRing
from sas.settings import EncryptionSettings

# The class attribute by which a model says its None fields may be left out of its payloads.
OMITS_NONE = "history_omits_none"
# The class attribute naming its fields whose default says that nothing happened (no failure, not
# an undo, no earlier result), which may be left out at that default too: the same default in
# every release, pinned by tests/scheduler/test_lean_payloads.py.
OMITS_AT_DEFAULT = "history_omits_at_default"


def left_out(value: Any) -> dict[Any, Any] | None:
    """What of ``value`` its payload leaves out (pydantic's ``exclude``): in a model that sets
    ``history_omits_none``, each field that is None and whose default is None; looked for in its
    nested models and lists of them, not in plain dicts (a task's input is the team's own data).

    A field left out reads back as its default, None: the same model, for this code and for any
    older worker's (a field a model gains is always defaulted, so older code has the same rule).
    Otherwise only the fields the model names in ``history_omits_at_default``, at their default:
    a field left out because it equals some other default would read back as whatever its default
    is *then*, so a changed default would rewrite every history written before it. Those named
    are facts, not policies (``failure_count=0``, ``compensation=False``, ``results={}``), and
    had the same default in every release that wrote them.
    """
    if isinstance(value, BaseModel):
        spec: dict[Any, Any] = {}
        for name, at_default, default, none_omitted in _omission_rules(type(value)):
            item = getattr(value, name)
            if at_default and item == default:
                spec[name] = True
            elif item is None:
                if none_omitted:
                    spec[name] = True
            elif isinstance(item, BaseModel | list):
                inner = left_out(item)
                if inner:
                    spec[name] = inner
        return spec or None
    if isinstance(value, list):
        spec = {i: inner for i, item in enumerate(value) if isinstance(item, BaseModel) and (inner := left_out(item))}
        return spec or None
    return None


# (field, left out at its default, that default, left out when None) for each field of a model
# class, read once per class: asking pydantic for a field's default calls its factory and inspects
# the factory's signature every time, several times for every call and result a run converts.
# Keyed by the class itself, so a model a run re-imports gets rules of its own.
_OMISSION_RULES: weakref.WeakKeyDictionary[type[BaseModel], tuple[tuple[str, bool, Any, bool], ...]] = (
    weakref.WeakKeyDictionary()
)


def _omission_rules(model: type[BaseModel]) -> tuple[tuple[str, bool, Any, bool], ...]:
    rules = _OMISSION_RULES.get(model)
    if rules is None:
        lean = getattr(model, OMITS_NONE, False)
        at_default: frozenset[str] = getattr(model, OMITS_AT_DEFAULT, frozenset())
        rules = tuple(
            (
                name,
                name in at_default,
                field.get_default(call_default_factory=True) if name in at_default else None,
                lean and field.default is None and field.default_factory is None,
            )
            for name, field in model.model_fields.items()
        )
        _OMISSION_RULES[model] = rules
    return rules


# Built once per process. The SDK makes a new payload converter for each workflow run, and with
# it an empty cache of type adapters, so each run built the adapters of its input, its accept's
# answer and its steps' results again: 40-70 us a run outside the sandbox, against 11 us read so
# (docs/benchmarks.md, section 20).
_ANY = TypeAdapter(Any)


class LeanJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON, with ``left_out`` applied to the models that ask for it: the calls, results
    and plans every task's history carries once per step. Read with no type adapter made per
    workflow run (``from_payload``)."""

    def from_payload(self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None) -> Any:
        # What the SDK's converter reads, the same way (pydantic's JSON validation), without an
        # adapter made per run: plain JSON by one adapter for the process, a model by its own
        # validator, made with its class. A model a run re-imports is read by its own class,
        # so nothing of one run is kept for the next. Any other hint goes to the SDK's converter.
        if type_hint is None or type_hint is Any:
            return _ANY.validate_json(payload.data)
        if isinstance(type_hint, type) and issubclass(type_hint, BaseModel):
            return type_hint.model_validate_json(payload.data)
        return super().from_payload(payload, type_hint)

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        if not getattr(type(value), OMITS_NONE, False):
            return super().to_payload(value)
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": self.encoding.encode()}, data=to_json(value, exclude=left_out(value))
        )


class LeanPayloadConverter(PydanticPayloadConverter):
    """Temporal's default converters, with JSON written by ``LeanJSONPayloadConverter``: still a
    pydantic converter to whoever checks a client's (it reads every payload as one does)."""

    def __init__(self) -> None:
        lean = LeanJSONPayloadConverter()
        CompositePayloadConverter.__init__(
            self,
            *(
                lean if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            ),
        )


lean_data_converter = DataConverter(payload_converter_class=LeanPayloadConverter, payload_codec=CompressionCodec())
"""Pydantic JSON, lean (``left_out``), its large payloads compressed (``compression.py``)."""


def codec_of(settings: EncryptionSettings | None) -> PayloadCodec:
    """What every sas payload goes through: compression of the large ones, then, when keys are
    configured, encryption (the codec server decodes with the same)."""
    if settings is None or not settings.enabled:
        return CompressionCodec()
    return CodecChain(CompressionCodec(), EncryptionCodec(KeyRing.from_settings(settings)))


def data_converter(settings: EncryptionSettings | None) -> DataConverter:
    """Pydantic JSON (lean: ``left_out``), its large payloads compressed, encrypted when keys are
    configured.

    With encryption on, failures' messages and stack traces are moved into an encrypted
    attribute too (Temporal's ``encode_common_attributes``): a validation error quotes the
    input it rejected, so a plain failure message would put order data back in clear.
    The history then shows "Encoded failure"; the codec server shows the real text.
    """
    if settings is None or not settings.enabled:
        return lean_data_converter
    codec = codec_of(settings)
    if not EncryptionCodec(KeyRing.from_settings(settings)).encrypts:
        # Decrypt-only (turning encryption off): encoded failures still decode either way.
        return dataclasses.replace(lean_data_converter, payload_codec=codec)
    return dataclasses.replace(
        lean_data_converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
