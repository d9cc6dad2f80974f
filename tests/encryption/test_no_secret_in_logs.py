"""No secret in any log line: the encryption keys and the Temporal API key go through
settings, the codec, the codec server, a failed connection and a rejected setting, with
sas's JSON logging at DEBUG, and none of them may show up in what is printed."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import Iterator

import httpx
import pytest
from google.protobuf import json_format
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from sas.payload_codec import PayloadDecryptionError, data_converter
from sas.payload_codec.server import build_codec_app
from sas.runtime.connect import connect
from sas.runtime.entry import describe_settings_error
from sas.runtime.failures import TemporalUnreachable
from sas.runtime.logs import configure_logging
from sas.settings import Settings
from tests.encryption.conftest import codec_for, encryption_settings, new_key

log = logging.getLogger("sas.test.secrets")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    current, retired, api_key = new_key(), new_key(), f"api-key-CANARY-{uuid.uuid4().hex}"
    codec_token = f"codec-token-CANARY-{uuid.uuid4().hex}"
    monkeypatch.setenv("SAS_ENCRYPTION__KEYS", json.dumps({"k2": current, "k1": retired}))
    monkeypatch.setenv("SAS_ENCRYPTION__CURRENT_KEY_ID", "k2")
    monkeypatch.setenv("SAS_TEMPORAL__API_KEY", api_key)
    monkeypatch.setenv("SAS_CODEC_SERVER__TOKEN", codec_token)
    monkeypatch.setenv("SAS_LOG_LEVEL", "DEBUG")
    # A key also leaks as its raw bytes' other spellings.
    spellings = [base64.b64decode(k).hex() for k in (current, retired)]
    return [current, retired, api_key, codec_token, *spellings]


@pytest.fixture
def sas_logging() -> Iterator[None]:
    """sas's logging for one test; the root logger is given back to pytest afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:], root.level = handlers, level


async def test_no_secret_reaches_logs_reprs_or_errors(
    secrets: list[str],
    temporal_address: str,
    sas_logging: None,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    configure_logging(settings.log_level)
    shown: list[str] = [repr(settings), str(settings), settings.model_dump_json(), repr(settings.encryption)]
    log.info("settings loaded: %s", settings)
    log.debug("temporal: %r", settings.temporal, extra={"fields": {"settings": settings.model_dump(mode="json")}})

    # The codec and converter, and every error they raise.
    converter = data_converter(settings.encryption)
    log.debug("converter %r codec %r", converter, converter.payload_codec)
    [payload] = await converter.encode([{"address": "1 Log Street"}])
    assert await converter.decode([payload]) == [{"address": "1 Log Street"}]
    payload.data = payload.data[:-1] + bytes([payload.data[-1] ^ 1])
    stranger = await codec_for(encryption_settings("k9", k9=new_key())).encode(
        pydantic_data_converter.payload_converter.to_payloads(["x"])
    )
    for bad in ([payload], stranger):
        try:
            await converter.decode(bad)
        except PayloadDecryptionError:
            log.exception("decode failed")

    # The codec server, with its access and error logs.
    app = build_codec_app(converter.payload_codec, ["http://localhost:8233"], settings.codec_server)  # type: ignore[arg-type]
    assert settings.codec_server.token is not None
    bearer = {"Authorization": f"Bearer {settings.codec_server.token.get_secret_value()}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        for body in ([payload], stranger):
            answer = await http.post(
                "/decode", json={"payloads": [json_format.MessageToDict(p) for p in body]}, headers=bearer
            )
            assert answer.status_code == 422, answer.text  # the decode failure, logged
            shown.append(answer.text)
        refused = await http.post("/decode", json={"payloads": []}, headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401
        shown.append(refused.text)

    # A connection that fails with the API key set (TLS towards a plaintext dev server).
    temporal = settings.temporal.model_copy(update={"address": temporal_address})
    try:
        await asyncio.wait_for(connect(temporal, "test", settings.encryption), timeout=20)
    except (TimeoutError, TemporalUnreachable) as failure:
        log.exception("connect failed")
        shown.append(str(failure))

    # A rejected key, reported the way `sas` reports bad settings.
    too_short = secrets[0][:32]  # 24 bytes: most of the real key
    monkeypatch.setenv("SAS_ENCRYPTION__KEYS", json.dumps({"k2": too_short}))
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None)  # type: ignore[call-arg]
    log.error("invalid settings:\n%s", describe_settings_error(caught.value))
    log.error("raw: %s", caught.value)
    shown += [str(caught.value), repr(caught.value.errors())]

    logging.getLogger().handlers[0].flush()
    out, err = capfd.readouterr()
    assert '"msg": "decode failed"' in err and "k9" in err  # the logging did happen
    everything = "\n".join([out, err, *shown])
    for secret in [*secrets, too_short]:
        assert secret not in everything, f"a secret leaked: {secret[:6]}..."
