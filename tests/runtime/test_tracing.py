"""With ``SAS_OTEL__ENABLED``, one order is one trace: the client's start, its workflow, each
Agent's activity and each Agent's HTTP call to a remote service, parent to child. An order
started by a client that does not trace gets a trace per Agent call instead.

The worker runs in-process on the session's dev server with the wiring ``worker.py`` uses
(``sas.runtime.otel.tracing`` into ``sas.runtime.connect.connect`` and the Agents' HTTP
client); spans go to an in-memory exporter instead of OTLP."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest_asyncio
import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.client import Client

from sas.runtime.connect import connect
from sas.runtime.otel import tracing
from sas.settings import TemporalSettings
from sas.task_models import TaskResult, TaskState
from sas_demo_services.launcher import ServiceProcess, free_port
from tests.helpers import fresh_id, wait_until
from tests.runtime.test_json_logs import start_worker
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
    # (what docs/monitoring.md says of orders started by `sas submit` or the Temporal CLI).
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


class OtlpReceiver:
    """An OTLP/HTTP endpoint (POST /v1/traces, protobuf) that keeps the spans it is sent."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Any]] = []  # (resource attributes, span)

    async def handle(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        for resource_spans in message.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                self.spans += [(resource, span) for span in scope_spans.spans]
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf")


@pytest_asyncio.fixture
async def otlp() -> AsyncIterator[tuple[OtlpReceiver, str]]:
    got = OtlpReceiver()
    port = free_port()
    app = Starlette(routes=[Route("/v1/traces", got.handle, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: asyncio.sleep(0, server.started), what="OTLP receiver up")
    try:
        yield got, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def string_attributes(span: Any) -> dict[str, str]:
    return {a.key: a.value.string_value for a in span.attributes}


async def test_python_worker_py_with_the_setting_exports_its_spans_over_otlp(
    client: Client, temporal_address: str, services: ServiceProcess, tmp_path: Path, otlp: tuple[OtlpReceiver, str]
) -> None:
    """The wiring in worker.py itself: SAS_OTEL__ENABLED and the standard OTEL_* variables, spans
    sent over OTLP/HTTP to a receiver here; an Agent's HTTP call is the child of its activity."""
    got, endpoint = otlp
    queue, task_id = fresh_id("otlp-queue"), fresh_id("otlp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAS_", "OTEL_"))}
    env |= {
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": queue,
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
        "SAS_SERVICES__URL": services.url,
        "SAS_OTEL__ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": "sas-worker-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # export within a fraction of a second, not 5 s
    }
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        handle = await client.start_workflow(
            "OrderWorkflow", order(), id=task_id, task_queue=queue, result_type=TaskResult
        )
        assert (await asyncio.wait_for(handle.result(), 120)).state == TaskState.PROCESSED

        async def runs() -> list[Any]:
            return [
                span
                for _resource, span in got.spans
                if span.name.startswith("RunActivity:") and string_attributes(span).get("temporalWorkflowID") == task_id
            ]

        ran = await wait_until(
            runs,
            lambda found: {f"RunActivity:{agent}" for agent in AGENT_CALLS} <= {span.name for span in found},
            timeout=30,
            what="the order's Agent activity spans",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 60)
    assert code == 0, (tmp_path / "worker.log").read_text()
    assert {"sas-worker-under-test"} == {resource.get("service.name") for resource, _span in got.spans}
    by_agent = {span.name.removeprefix("RunActivity:"): span for span in ran}
    for agent, path in AGENT_CALLS.items():
        activity_span = by_agent[agent]
        [call] = [
            span
            for _resource, span in got.spans
            if span.parent_span_id == activity_span.span_id and span.trace_id == activity_span.trace_id
        ]
        attributes = string_attributes(call)
        assert urlsplit(attributes.get("url.full") or attributes.get("http.url", "")).path == path, agent
