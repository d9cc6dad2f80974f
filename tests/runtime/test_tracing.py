"""With ``SAS_OTEL__ENABLED``, one order is one trace: the client's start, its workflow, each
Agent's activity and each Agent's HTTP call to a remote service, parent to child. An order
started by a client that does not trace gets a trace per Agent call instead.

The worker runs in-process on the session's dev server with the wiring ``worker.py`` uses
(``sas_runtime.otel.tracing`` into ``sas_runtime.connect.connect`` and the Agents' HTTP
client); spans go to an in-memory exporter instead of OTLP."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from remote_services.launcher import ServiceProcess
from sas_runtime.connect import connect
from sas_runtime.otel import tracing
from settings import TemporalSettings
from task_models import TaskResult, TaskState
from tests.helpers import fresh_id, wait_until
from tests.stack import order, start_stack

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


def of_order(spans: Sequence[ReadableSpan], task_id: str) -> list[ReadableSpan]:
    """The Temporal spans of one order (the interceptor stamps each with its workflow id)."""
    return [s for s in spans if (s.attributes or {}).get("temporalWorkflowID") == task_id]


def calls_under(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if parent_of(s) == span_id(parent) and http_path(s) in AGENT_CALLS.values()]


async def test_one_order_is_one_trace_from_its_workflow_to_the_http_calls(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces = tracing(True, provider)
    assert traces.enabled
    traced_client = await connect(
        TemporalSettings(address=temporal_address), "otel-test", interceptors=traces.interceptors
    )
    traced_id, untraced_id = fresh_id("traced"), fresh_id("untraced")
    async with start_stack(
        traced_client,
        temporal_address,
        services.url,
        sqlite_url,
        supervisor=False,
        instrument_http=traces.instrument_http,
    ) as stack:
        result: TaskResult = await (await stack.submit(traced_id)).result()
        assert result.state == TaskState.PROCESSED
        # The same worker, an order started by a client that does not trace (the session's).
        untraced = await client.start_workflow(
            "OrderWorkflow",
            order(),
            id=untraced_id,
            task_queue=stack.settings.temporal.task_queue,
            result_type=TaskResult,
        )
        assert (await untraced.result()).state == TaskState.PROCESSED

    async def http_spans() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if http_path(s) in AGENT_CALLS.values()]

    await wait_until(http_spans, lambda found: len(found) == 6, timeout=30, what="the six HTTP spans")
    every = exporter.get_finished_spans()  # this provider traced this test's two orders only

    spans = of_order(every, traced_id)
    start = by_name(spans, "StartWorkflow:OrderWorkflow")
    assert start.parent is None  # the submitting client's span is the root
    assert start.context is not None
    trace_id = start.context.trace_id
    run = by_name(spans, "RunWorkflow:OrderWorkflow")
    assert parent_of(run) == span_id(start)
    for agent, path in AGENT_CALLS.items():
        scheduled = by_name(spans, f"StartActivity:{agent}")
        ran = by_name(spans, f"RunActivity:{agent}")
        [call] = calls_under(every, ran)
        assert http_path(call) == path, agent
        assert parent_of(scheduled) == span_id(start), agent
        assert parent_of(ran) == span_id(scheduled), agent
        attributes = call.attributes or {}
        assert attributes.get("http.response.status_code", attributes.get("http.status_code")) == 200, agent
        for span in (scheduled, ran, call):
            assert span.context is not None and span.context.trace_id == trace_id, span.name
    assert run.context is not None and run.context.trace_id == trace_id

    # Untraced start: no workflow spans to hang from, so each Agent call is a trace of its own
    # (what README.md says of orders started by `sas submit` or the Temporal CLI).
    spans = of_order(every, untraced_id)
    assert not [s for s in spans if s.name.endswith(":OrderWorkflow") or s.name.startswith("StartActivity:")]
    trace_ids = set()
    for agent, path in AGENT_CALLS.items():
        ran = by_name(spans, f"RunActivity:{agent}")
        [call] = calls_under(every, ran)
        assert ran.parent is None and http_path(call) == path, agent
        assert ran.context is not None and call.context is not None
        assert call.context.trace_id == ran.context.trace_id, agent
        trace_ids.add(ran.context.trace_id)
    assert len(trace_ids) == len(AGENT_CALLS) and trace_id not in trace_ids
