"""Keys for the encryption tests: fresh random ones, never a fixed key in the repository."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
import uvicorn

from sas.payload_codec import EncryptionCodec, KeyRing
from sas.payload_codec.server import build_codec_app
from sas.settings import CodecServerSettings, EncryptionSettings
from sas_demo_services.launcher import free_port
from tests.helpers import wait_until

UI = "http://localhost:8233"


def new_key() -> str:
    """A key as an operator writes it into SAS_ENCRYPTION__KEYS."""
    return base64.b64encode(os.urandom(32)).decode()


def encryption_settings(current: str | None = "k1", **keys: str) -> EncryptionSettings:
    return EncryptionSettings(keys=keys or {"k1": new_key()}, current_key_id=current)


def codec_for(settings: EncryptionSettings) -> EncryptionCodec:
    return EncryptionCodec(KeyRing.from_settings(settings))


@pytest.fixture
def encryption() -> EncryptionSettings:
    return encryption_settings()


@asynccontextmanager
async def codec_server(
    codec: EncryptionCodec, ui_origins: Sequence[str] = (UI,), access: CodecServerSettings | None = None
) -> AsyncIterator[str]:
    """The codec server in this event loop on a free port; yields its base URL.

    ``access`` defaults to the settings' defaults (no token, loopback host names), never the
    environment of whoever runs the tests."""
    port = free_port()
    app = build_codec_app(codec, ui_origins, access or CodecServerSettings())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off"))
    serving = asyncio.create_task(server.serve())

    async def started() -> bool:
        assert not serving.done(), "the codec server stopped while starting"
        return server.started

    await wait_until(started, timeout=10, interval=0.05, what="codec server")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
