"""The codec server over real HTTP: the Temporal UI's /encode and /decode protocol, CORS,
and clear 4xx answers for what it cannot handle."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from temporalio.contrib.pydantic import pydantic_data_converter

from payload_codec.server import MAX_BODY_BYTES
from remote_services.launcher import free_port
from settings import EncryptionSettings
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


async def test_cors_lets_the_ui_origin_in_and_no_other(codec_url: str) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-namespace"}
    async with httpx.AsyncClient(base_url=codec_url) as http:
        allowed = await http.options("/decode", headers={"Origin": UI, **preflight})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == UI
        assert "x-namespace" in allowed.headers["access-control-allow-headers"].lower()
        posted = await http.post("/decode", json={"payloads": []}, headers={"Origin": UI})
        assert posted.headers["access-control-allow-origin"] == UI
        assert posted.json() == {"payloads": []}

        stranger = await http.options("/decode", headers={"Origin": "http://evil.example", **preflight})
        assert stranger.status_code == 400
        assert "access-control-allow-origin" not in stranger.headers


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "body is not JSON"),
        (b'{"payload": []}', 'expected a JSON object {"payloads": [...]}'),
        (b'{"payloads": [7]}', "payloads[0] is not an object"),
        (b'{"payloads": [{"colour": "red"}]}', "payloads[0] is not a Temporal Payload"),
    ],
)
async def test_bad_bodies_get_400_with_a_message(codec_url: str, content: bytes, message: str) -> None:
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert message in answer.json()["error"]


async def test_an_oversized_body_gets_413(codec_url: str) -> None:
    async with httpx.AsyncClient(base_url=codec_url) as http:
        answer = await http.post("/decode", content=b" " * (MAX_BODY_BYTES + 1))
    assert answer.status_code == 413 and "over the limit" in answer.json()["error"]


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
    # The command as registered in `sas` (sas_cli/main.py adds it with the same register()).
    script = (
        "import typer\n"
        "from sas_cli.codec_server_cmd import register\n"
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


async def test_sas_codec_server_command_serves_with_keys_from_settings() -> None:
    port, key = free_port(), new_key()
    env = {"SAS_ENCRYPTION__KEYS": f'{{"k7": "{key}"}}', "SAS_ENCRYPTION__CURRENT_KEY_ID": "k7"}
    process = sas_codec_server("--port", str(port), "--ui-origin", "http://ui.test:8080", env=env)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

            async def encode() -> httpx.Response | None:
                try:
                    return await http.post("/encode", json=as_json(["hi"]), headers={"Origin": "http://ui.test:8080"})
                except httpx.TransportError:
                    assert process.poll() is None, process.communicate()
                    return None

            answer = await wait_until(encode, lambda r: r is not None, timeout=20, what="sas codec-server")
        assert answer is not None and answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "http://ui.test:8080"
        assert base64.b64decode(answer.json()["payloads"][0]["metadata"]["encryption-key-id"]) == b"k7"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert key not in out + err


def test_sas_codec_server_refuses_to_start_without_keys() -> None:
    process = sas_codec_server("--port", str(free_port()), env={"SAS_ENCRYPTION__KEYS": "{}"})
    _, err = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "payload encryption is not configured" in err
