"""SAS_ENCRYPTION__*: how keys are given, and the messages a wrong one gets."""

from __future__ import annotations

import base64
import json
import os

import pytest
from pydantic import ValidationError

from sas.runtime.entry import describe_settings_error
from sas.settings import EncryptionSettings, Settings
from tests.encryption.conftest import new_key


def from_env(monkeypatch: pytest.MonkeyPatch, keys: dict[str, str], current: str | None) -> Settings:
    monkeypatch.setenv("SAS_ENCRYPTION__KEYS", json.dumps(keys))
    if current is not None:
        monkeypatch.setenv("SAS_ENCRYPTION__CURRENT_KEY_ID", current)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_keys_and_current_id_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    k1, k2 = new_key(), new_key()
    settings = from_env(monkeypatch, {"k1": k1, "K2": k2}, "K2")
    assert settings.encryption.current_key_id == "K2"  # ids keep their case
    assert settings.encryption.keys["k1"].get_secret_value() == k1
    assert settings.encryption.enabled


def test_off_by_default() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert not settings.encryption.enabled and settings.encryption.current_key_id is None


@pytest.mark.parametrize(
    "keys, current, message",
    [
        ({"k1": "not base64!"}, "k1", "key 'k1' is not valid base64"),
        (
            {"k1": base64.b64encode(os.urandom(16)).decode()},
            "k1",
            "key 'k1' decodes to 16 bytes; AES-256 needs exactly 32",
        ),
        ({"k 1": None}, None, "key id 'k 1': use 1-64 letters"),
        ({"k1": None}, "k9", "current_key_id\n  Value error, 'k9' is not one of the keys (k1)"),
        ({}, "k1", "'k1' is not one of the keys (none configured)"),
    ],
)
def test_bad_keys_get_a_clear_message_that_never_echoes_the_key(
    keys: dict[str, str | None], current: str | None, message: str
) -> None:
    filled = {k: v or new_key() for k, v in keys.items()}
    with pytest.raises(ValidationError) as caught:
        EncryptionSettings(keys=filled, current_key_id=current)
    assert message in str(caught.value)
    for value in filled.values():
        assert value not in str(caught.value)
        assert value not in repr(caught.value.errors())


def test_start_up_message_names_the_variable_and_hides_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    short = base64.b64encode(os.urandom(16)).decode()
    with pytest.raises(ValidationError) as caught:
        from_env(monkeypatch, {"k1": short}, "k1")
    printed = describe_settings_error(caught.value)
    assert "SAS_ENCRYPTION__KEYS" in printed and "decodes to 16 bytes" in printed
    assert short not in printed and short not in str(caught.value)
