"""OpenTelemetry traces of the worker, when ``SAS_OTEL__ENABLED`` is set (the ``otel`` extra).

Temporal's own ``TracingInterceptor`` carries the trace context from the client that starts a
task, through its workflow, to each Agent's activity; httpx's instrumentation adds a span per
remote call under the activity that makes it. Spans go out over OTLP/HTTP, configured by the
standard ``OTEL_EXPORTER_OTLP_*`` and ``OTEL_SERVICE_NAME`` variables.

A task is one trace when the client that started it traces too (its ``StartWorkflow`` span is
the root). Started from an untraced client (the Temporal CLI, a schedule), each Agent call is a
trace of its own: the interceptor's workflow spans need a parent to hang from.

opentelemetry is imported only when tracing is on: a worker installed without the extra never
loads it, and one that asks for tracing without it stops with one line (``MissingExtra``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx
import temporalio.client

from sas.runtime.failures import MissingExtra

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

# The names this module's spans are recorded under (the instrumentation scope).
TRACER_NAME = "sas"


def _instrument_nothing(_: httpx.AsyncClient) -> None:
    return None


def _flush_nothing() -> None:
    return None


@dataclass(frozen=True)
class Tracing:
    """What a process wires in: interceptors for its Temporal client, and a hook for its HTTP clients."""

    interceptors: Sequence[temporalio.client.Interceptor] = ()
    instrument_http: Callable[[httpx.AsyncClient], None] = _instrument_nothing
    # Sends what is still buffered and stops the exporter: called once, as the process ends.
    shutdown: Callable[[], None] = _flush_nothing

    @property
    def enabled(self) -> bool:
        return bool(self.interceptors)


def tracing(enabled: bool, provider: TracerProvider | None = None) -> Tracing:
    """Tracing as the settings ask: nothing when off; else the interceptor and httpx's
    instrumentation, recording into ``provider`` (default: one exporting over OTLP/HTTP)."""
    if not enabled:
        return Tracing()
    try:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from temporalio.contrib.opentelemetry import TracingInterceptor

        chosen = provider or _otlp_provider()
    except ImportError as err:
        raise MissingExtra("otel", "SAS_OTEL__ENABLED is set", err) from err

    def instrument(client: httpx.AsyncClient) -> None:
        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=chosen)

    return Tracing(
        interceptors=[TracingInterceptor(chosen.get_tracer(TRACER_NAME))],
        instrument_http=instrument,
        shutdown=chosen.shutdown,
    )


def _otlp_provider() -> TracerProvider:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create also reads OTEL_RESOURCE_ATTRIBUTES; the attributes given here win over it.
    service = os.environ.get("OTEL_SERVICE_NAME") or "sas-worker"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
