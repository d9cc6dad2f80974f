"""The codec server over real HTTP: the Temporal UI's /encode and /decode protocol, CORS,
and clear 4xx answers for what it cannot handle."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from pydantic import SecretStr
from temporalio.contrib.pydantic import pydantic_data_converter

from sas.payload_codec.server import MAX_BODY_BYTES
from sas.settings import CodecServerSettings, EncryptionSettings
from sas_demo_services.launcher import free_port
from tests.encryption.conftest import UI, codec_for, codec_server, encryption_settings, new_key
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def as_json(values: list[object]) -> dict[str, object]:
    payloads = pydantic_data_converter.payload_converter.to_payloads(values)
    return {"payloads": [json_format.MessageToDict(p) for p in payloads]}


@pytest.fixture
async def codec_url(encryption: EncryptionSettings) -> AsyncIterator[str]:
    async with codec_server(codec_for(encryption)) as url:
        yield url


async def test_encode_then_decode_round_trips(codec_url: str) -> None:
    body = as_json([{"address": "1 Round Trip Road"}, "two"])
    async with httpx.AsyncClient(base_url=codec_url) as http:
        encoded = await http.post("/encode", json=body, headers={"X-Namespace": "default"})
        assert encoded.status_code == 200, encoded.text
        assert b"Round Trip" not in encoded.content
        metadata = encoded.json()["payloads"][0]["metadata"]
        assert base64.b64decode(metadata["encoding"]) == b"binary/encrypted"
        assert base64.b64decode(metadata["encryption-key-id"]) == b"k1"

        decoded = await http.post("/decode", json=encoded.json())
        assert decoded.status_code == 200
        assert decoded.json() == body
        # The CLI's --codec-endpoint 'http://host/{namespace}' form.
        assert (await http.post("/default/decode", json=encoded.json())).json() == body


# What the Temporal UI's browser sends before a decode call: its own headers, and
# Authorization when "pass access token" is on.
UI_PREFLIGHT = {
    "Origin": UI,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
}


async def test_cors_preflight_lets_the_ui_origin_in_and_no_other(codec_url: str) -> None:
    async with httpx.AsyncClient(base_url=codec_url) as http:
        allowed = await http.options("/decode", headers=UI_PREFLIGHT)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == UI
        assert allowed.headers["access-control-allow-credentials"] == "true"
        assert "POST" in allowed.headers["access-control-allow-methods"]
        granted = {h.strip() for h in allowed.headers["access-control-allow-headers"].lower().split(",")}
        assert {"content-type", "x-namespace", "authorization"} <= granted
        posted = await http.post("/decode", json={"payloads": []}, headers={"Origin": UI, "X-Namespace": "default"})
        assert posted.headers["access-control-allow-origin"] == UI
        assert posted.json() == {"payloads": []}

        stranger = await http.options("/decode", headers={**UI_PREFLIGHT, "Origin": "http://evil.example"})
        assert stranger.status_code == 400
        assert "access-control-allow-origin" not in stranger.headers
        # A simple (non-preflighted) POST from elsewhere gets no CORS grant either, so the page can't read it.
        foreign = await http.post("/decode", json={"payloads": []}, headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in foreign.headers


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
async def test_only_json_is_taken(codec_url: str, content_type: str | None) -> None:
    """text/plain and forms are what a page on any origin can POST without a preflight."""
    headers = {"Content-Type": content_type} if content_type else {}
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", content=b'{"payloads": []}', headers=headers)
        with_charset = await http.post(
            "/decode", content=b'{"payloads": []}', headers={"Content-Type": "application/json; charset=utf-8"}
        )
    assert answer.status_code == 415
    assert "Content-Type must be application/json" in answer.json()["error"]
    assert with_charset.status_code == 200 and with_charset.json() == {"payloads": []}


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "body is not JSON"),
        (b'{"payload": []}', 'expected a JSON object {"payloads": [...]}'),
        (b'{"payloads": [7]}', "payloads[0] is not an object"),
        (b'{"payloads": [{"colour": "red"}]}', "payloads[0] is not a Temporal Payload"),
        (b'{"payloads": [{"metadata": {}, "data": NaN}]}', "NaN is not a JSON number"),
        (b'{"payloads": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 64 levels"),
    ],
)
async def test_bad_bodies_get_400_with_a_message(codec_url: str, content: bytes, message: str) -> None:
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert message in answer.json()["error"]


async def test_a_deeply_nested_body_is_one_log_line_not_a_traceback(
    codec_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: Python's parser hit its recursion limit, and the server answered a bare 500.
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json() == {
        "error": 'body is not JSON (nested deeper than 64 levels of objects and arrays); expected {"payloads": [...]}'
    }
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "codec server answered 400 to a decode request: the body is not a payload list"
    ]
    assert not any(r.exc_info for r in caplog.records)


async def test_an_oversized_body_gets_413(codec_url: str) -> None:
    json_type = {"Content-Type": "application/json"}

    async def chunks() -> AsyncIterator[bytes]:
        # No Content-Length (chunked): the server has to count as it reads.
        for _ in range(MAX_BODY_BYTES // (1024 * 1024) + 1):
            yield b" " * (1024 * 1024)

    async with httpx.AsyncClient(base_url=codec_url) as http:
        declared = await http.post("/decode", content=b" " * (MAX_BODY_BYTES + 1), headers=json_type)
        streamed = await http.post("/decode", content=chunks(), headers=json_type)
        just_under = await http.post("/decode", content=b'{"payloads": []}'.ljust(MAX_BODY_BYTES), headers=json_type)
    assert declared.status_code == 413 and "over the limit" in declared.json()["error"]
    assert streamed.status_code == 413 and "over the limit" in streamed.json()["error"]
    assert just_under.status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8234", "rebind.attacker.test"])
async def test_a_foreign_host_header_gets_400(codec_url: str, host: str) -> None:
    """A DNS-rebinding page talks to the codec server under its own host name: refuse it."""
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", json={"payloads": []}, headers={"Host": host})
        health = await http.get("/healthz", headers={"Host": host})
        port = codec_url.rpartition(":")[2]
        for served in (f"localhost:{port}", f"127.0.0.1:{port}"):
            ok = await http.post("/decode", json={"payloads": []}, headers={"Host": served})
            assert ok.status_code == 200, served
    assert answer.status_code == 400 and "Invalid host header" in answer.text
    assert health.status_code == 400


async def test_allowed_hosts_come_from_settings(encryption: EncryptionSettings) -> None:
    access = CodecServerSettings(allowed_hosts=["codec.internal"])
    async with codec_server(codec_for(encryption), access=access) as url, httpx.AsyncClient(base_url=url) as http:
        loopback = await http.post("/decode", json={"payloads": []})
        named = await http.post("/decode", json={"payloads": []}, headers={"Host": "codec.internal:8234"})
    assert loopback.status_code == 400
    assert named.status_code == 200


async def test_with_a_token_set_only_its_bearer_is_served(encryption: EncryptionSettings) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    access = CodecServerSettings(token=SecretStr(token))
    body = as_json(["secret order"])
    async with codec_server(codec_for(encryption), access=access) as url, httpx.AsyncClient(base_url=url) as http:
        missing = await http.post("/encode", json=body)
        wrong = await http.post("/encode", json=body, headers={"Authorization": f"Bearer {token}x"})
        basic = await http.post("/encode", json=body, headers={"Authorization": f"Basic {token}"})
        # The token is checked before anything else: no hint about content type to a stranger.
        wrong_type = await http.post("/encode", content=b"x", headers={"Content-Type": "text/plain"})
        right = await http.post("/encode", json=body, headers={"Authorization": f"Bearer {token}", "Origin": UI})
        # Browsers send the preflight without credentials: it must pass so the real call can carry them.
        preflight = await http.options("/encode", headers=UI_PREFLIGHT)
        health = await http.get("/healthz")
    for refused in (missing, wrong, basic, wrong_type):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert token not in refused.text
    assert right.status_code == 200 and right.headers["access-control-allow-origin"] == UI
    assert b"secret order" not in right.content
    assert preflight.status_code == 200
    assert health.status_code == 200 and health.text == "ok"


async def test_healthz_answers_without_a_key_or_body(codec_url: str) -> None:
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.get("/healthz")
    assert answer.status_code == 200 and answer.text == "ok"


async def test_payloads_it_cannot_decrypt_get_422_naming_the_key(codec_url: str) -> None:
    foreign = codec_for(encryption_settings("old", old=new_key()))
    [payload] = await foreign.encode(pydantic_data_converter.payload_converter.to_payloads(["x"]))
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", json={"payloads": [json_format.MessageToDict(payload)]})
        wrong_method = await http.get("/decode")
    assert answer.status_code == 422
    assert "key 'old', which is not configured (known: k1)" in answer.json()["error"]
    assert wrong_method.status_code == 405


def sas_codec_server(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    # The command as registered in `sas` (sas/cli/main.py adds it with the same register()).
    script = (
        "import typer\n"
        "from sas.cli.codec_server_cmd import register\n"
        "app = typer.Typer()\n"
        "app.callback()(lambda: None)\n"
        "register(app)\n"
        "app()\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script, "codec-server", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def serving(http: httpx.AsyncClient, process: subprocess.Popen[str]) -> None:
    """Wait until the started ``sas codec-server`` answers its health check (failing if it exits)."""

    async def healthy() -> httpx.Response | None:
        try:
            return await http.get("/healthz")
        except httpx.TransportError:
            assert process.poll() is None, process.communicate()
            return None

    await wait_until(healthy, lambda r: r is not None, timeout=20, what="sas codec-server")


async def test_sas_codec_server_command_serves_with_keys_from_settings() -> None:
    port, key, token = free_port(), new_key(), f"tok-{uuid.uuid4().hex}"
    env = {
        "SAS_ENCRYPTION__KEYS": f'{{"k7": "{key}"}}',
        "SAS_ENCRYPTION__CURRENT_KEY_ID": "k7",
        "SAS_CODEC_SERVER__TOKEN": token,
    }
    process = sas_codec_server("--port", str(port), "--ui-origin", "http://ui.test:8080", env=env)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            await serving(http, process)
            origin = {"Origin": "http://ui.test:8080"}
            refused = await http.post("/encode", json=as_json(["hi"]), headers=origin)
            answer = await http.post(
                "/encode", json=as_json(["hi"]), headers={**origin, "Authorization": f"Bearer {token}"}
            )
        assert refused.status_code == 401, "the token from SAS_CODEC_SERVER__TOKEN is not enforced"
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "http://ui.test:8080"
        assert base64.b64decode(answer.json()["payloads"][0]["metadata"]["encryption-key-id"]) == b"k7"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert key not in out + err and token not in out + err


async def test_sas_codec_server_without_keys_inflates_what_sas_compressed() -> None:
    from sas.payload_codec.compression import ENCODING, CompressionCodec

    port = free_port()
    big = pydantic_data_converter.payload_converter.to_payloads([{"items": [f"item-{n}" for n in range(2000)]}])
    packed = await CompressionCodec().encode(big)
    assert packed[0].metadata["encoding"] == ENCODING
    process = sas_codec_server("--port", str(port), env={"SAS_ENCRYPTION__KEYS": "{}"})
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            await serving(http, process)
            body = {"payloads": [json_format.MessageToDict(p) for p in packed]}
            answer = await http.post("/decode", json=body, headers={"Origin": UI})
        assert answer.status_code == 200, answer.text
        shown = answer.json()["payloads"][0]
        assert base64.b64decode(shown["metadata"]["encoding"]) == b"json/plain"
        assert base64.b64decode(shown["data"]) == big[0].data
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=10)
    assert "compression only" in out
