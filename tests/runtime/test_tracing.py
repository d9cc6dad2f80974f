"""With ``SAS_OTEL__ENABLED``, one order is one trace: the client's start, its workflow, each
Agent's activity and each Agent's HTTP call to a remote service, parent to child.

The worker runs in-process on the session's dev server with the wiring ``worker.py`` uses
(``sas_runtime.otel.tracing`` into ``sas_runtime.connect.connect`` and the Agents' HTTP
client); spans go to an in-memory exporter instead of OTLP."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from remote_services.launcher import ServiceProcess
from sas_runtime.connect import connect
from sas_runtime.otel import tracing
from settings import TemporalSettings
from task_models import TaskResult, TaskState
from tests.helpers import fresh_id, wait_until
from tests.stack import start_stack

# Agent activity -> the remote service path it posts to (activities/services.py).
AGENT_CALLS = {
    "inventory.reserve": "/inventory/reserve",
    "payment.charge": "/payment/charge",
    "shipping.ship": "/shipping/ship",
}


def by_name(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def http_path(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    url = attributes.get("url.full") or attributes.get("http.url")
    return urlsplit(str(url)).path


async def test_one_order_is_one_trace_from_its_workflow_to_the_http_calls(
    temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces = tracing(True, provider)
    assert traces.enabled
    client = await connect(TemporalSettings(address=temporal_address), "otel-test", interceptors=traces.interceptors)
    task_id = fresh_id("traced")
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, instrument_http=traces.instrument_http
    ) as stack:
        handle = await stack.submit(task_id)
        result: TaskResult = await handle.result()
    assert result.state == TaskState.PROCESSED

    def http_spans() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if http_path(s) in AGENT_CALLS.values()]

    async def probe() -> list[ReadableSpan]:
        return http_spans()

    await wait_until(probe, lambda found: len(found) == 3, timeout=30, what="the three HTTP spans")
    spans = exporter.get_finished_spans()  # this provider traced this test's one order only

    start = by_name(spans, "StartWorkflow:OrderWorkflow")
    assert start.parent is None  # the submitting client's span is the root
    assert start.context is not None
    trace_id = start.context.trace_id
    run = by_name(spans, "RunWorkflow:OrderWorkflow")
    assert parent_of(run) == span_id(start)
    for agent, path in AGENT_CALLS.items():
        scheduled = by_name(spans, f"StartActivity:{agent}")
        ran = by_name(spans, f"RunActivity:{agent}")
        [call] = [s for s in http_spans() if http_path(s) == path]
        assert parent_of(scheduled) == span_id(start), agent
        assert parent_of(ran) == span_id(scheduled), agent
        assert parent_of(call) == span_id(ran), agent
        attributes = call.attributes or {}
        assert attributes.get("http.response.status_code", attributes.get("http.status_code")) == 200, agent
        for span in (scheduled, ran, call):
            assert span.context is not None and span.context.trace_id == trace_id, span.name
    assert run.context is not None and run.context.trace_id == trace_id
    assert (run.attributes or {}).get("temporalWorkflowID") == task_id
