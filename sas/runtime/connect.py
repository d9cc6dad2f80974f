"""The one place a Temporal client is built: address, namespace, TLS/mTLS, API key and
the data converter (pydantic JSON, encrypted when keys are set), all from settings."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

from temporalio.client import Client, Interceptor, TLSConfig
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from sas.payload_codec import data_converter
from sas.runtime.failures import TemporalUnreachable
from sas.settings import EncryptionSettings, TemporalSettings


def tls_config(settings: TemporalSettings) -> TLSConfig | bool:
    tls = settings.tls
    if not tls.enabled:
        # Temporal Cloud with an API key needs TLS even without client certificates.
        return settings.api_key is not None

    def read(path: str | None) -> bytes | None:
        return Path(path).expanduser().read_bytes() if path else None

    return TLSConfig(
        server_root_ca_cert=read(tls.server_root_ca_path),
        client_cert=read(tls.client_cert_path),
        client_private_key=read(tls.client_key_path),
        domain=tls.server_name,
    )


def worker_identity(settings: TemporalSettings, role: str) -> str:
    """Who is running an attempt (the pattern's LockedBy): role, pid and host."""
    return settings.identity or f"{role}-{os.getpid()}@{socket.gethostname()}"


async def connect(
    settings: TemporalSettings,
    role: str = "client",
    encryption: EncryptionSettings | None = None,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """A client (and, through it, workers) for ``role``; pass ``encryption`` wherever payloads are
    written or read, or order data goes to the history in clear and encrypted history is unreadable.
    ``interceptors`` apply to the client's calls and to every worker built on it (tracing)."""
    try:
        return await Client.connect(
            settings.address,
            namespace=settings.namespace,
            data_converter=data_converter(encryption),
            tls=tls_config(settings),
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            identity=worker_identity(settings, role),
            runtime=runtime,
            interceptors=interceptors,
        )
    except RuntimeError as err:
        # Only the connection can fail here: Client.connect does nothing else.
        raise TemporalUnreachable(settings.address, str(err)) from err


def metrics_runtime(bind: str | None) -> Runtime | None:
    """A Temporal runtime that serves Prometheus metrics on ``bind`` (host:port): the SDK's own
    series and sas's, which are recorded through the same meter. None: no endpoint."""
    if not bind:
        return None
    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind)))
