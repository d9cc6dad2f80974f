"""Key material from settings: the one place a ``SecretStr`` key is opened."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field

from sas.settings import EncryptionSettings

KEY_BYTES = 32  # AES-256


@dataclass(frozen=True)
class KeyRing:
    """Every key a process may decrypt with, by id, and the one it encrypts with.

    ``repr`` lists ids only, so a KeyRing can appear in a log line or a traceback.
    """

    keys: Mapping[str, bytes] = field(repr=False)
    current_key_id: str | None = None

    def __post_init__(self) -> None:
        # Settings already check this; a KeyRing built by hand (tests, tools) gets the same rules.
        for key_id, key in self.keys.items():
            if len(key) != KEY_BYTES:
                raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES-256 needs exactly {KEY_BYTES}")
        if self.current_key_id is not None and self.current_key_id not in self.keys:
            raise ValueError(f"current key {self.current_key_id!r} is not one of the keys ({self.describe_ids()})")

    @classmethod
    def from_settings(cls, settings: EncryptionSettings) -> KeyRing:
        keys = {key_id: base64.b64decode(secret.get_secret_value()) for key_id, secret in settings.keys.items()}
        return cls(keys=keys, current_key_id=settings.current_key_id)

    @property
    def key_ids(self) -> list[str]:
        return sorted(self.keys)

    def describe_ids(self) -> str:
        return ", ".join(self.key_ids) or "none configured"

    def __repr__(self) -> str:
        return f"KeyRing(key_ids={self.key_ids!r}, current_key_id={self.current_key_id!r})"
