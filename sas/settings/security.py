"""What keeps payloads and posts safe: payload encryption, the codec server, the callbacks' secret."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

from sas.settings.checks import standard_webhooks_secret


class EncryptionSettings(BaseModel):
    """Payload encryption (AES-256-GCM) of what sas writes into Temporal's history; see docs/security.md.

    ``SAS_ENCRYPTION__KEYS='{"k2": "<base64>", "k1": "<base64>"}'`` and ``SAS_ENCRYPTION__CURRENT_KEY_ID=k2``.
    """

    keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Key id -> base64 of a 32-byte key. Keep retired keys here while histories use them.",
    )
    current_key_id: str | None = Field(
        default=None, description="Key that encrypts new payloads; unset = write plaintext (known keys still decrypt)."
    )

    @model_validator(mode="before")
    @classmethod
    def _hide_keys_first(cls, data: Any) -> Any:
        # pydantic prints a rejected field's input in its error; wrapping the raw strings in
        # SecretStr before any check runs means a bad key is shown as '**********'.
        if isinstance(data, dict) and isinstance(data.get("keys"), dict):
            data = {**data, "keys": {k: SecretStr(v) if isinstance(v, str) else v for k, v in data["keys"].items()}}
        return data

    @field_validator("keys")
    @classmethod
    def _aes256_keys(cls, keys: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for key_id, secret in keys.items():
            # The id travels in clear in every payload's metadata: keep it short and boring.
            if not (0 < len(key_id) <= 64 and key_id.isascii() and all(c.isalnum() or c in "._-" for c in key_id)):
                raise ValueError(f"key id {key_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
            try:
                raw = base64.b64decode(secret.get_secret_value(), validate=True)
            except (binascii.Error, ValueError):
                # Never echo the value: a near-miss of a key is still most of a key.
                raise ValueError(f"key {key_id!r} is not valid base64") from None
            if len(raw) != 32:
                raise ValueError(f"key {key_id!r} decodes to {len(raw)} bytes; AES-256 needs exactly 32")
        return keys

    @field_validator("current_key_id")
    @classmethod
    def _current_key_is_known(cls, key_id: str | None, info: ValidationInfo) -> str | None:
        # A field check, not a model one: a model-level error would carry the raw key strings.
        keys = info.data.get("keys")
        if key_id is not None and keys is not None and key_id not in keys:
            known = ", ".join(sorted(keys)) or "none configured"
            raise ValueError(f"{key_id!r} is not one of the keys ({known})")
        return key_id

    @property
    def enabled(self) -> bool:
        """Whether any key is configured: the codec is installed (it may still only decrypt)."""
        return bool(self.keys)


class CodecServerSettings(BaseModel):
    """Who may use ``sas codec-server``: it decrypts whatever it is sent (docs/security.md)."""

    token: SecretStr | None = Field(
        default=None,
        description="Bearer token every /encode and /decode call must carry; unset = no token asked for.",
    )
    allowed_hosts: list[str] = Field(
        default=["localhost", "127.0.0.1"],
        description="Host header values served (port ignored, '*.example.com' allowed); others get 400.",
    )


class SealSettings(BaseModel):
    """The keys sas's workers seal calls and results with (HMAC-SHA256; sas.task_models.seals):
    an Agent runs only a call its Scheduler sealed, and the Scheduler takes only a result its
    Agent sealed, so ``temporal activity complete`` or a look-alike workflow cannot drive a task.

    ``SAS_SEAL__KEYS='["<new secret>", "<retired secret>"]'``: the first seals, each verifies.
    """

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected key is not printed

    keys: list[SecretStr] = Field(
        default_factory=list,
        description="Secrets of 32+ characters, the sealing one first; every worker of a deployment holds the same."
        " Unset: derived from the state store's URL (keep it secret then, or set a key).",
    )
    accept_unsealed_calls: bool = Field(
        default=False,
        description="Run an Agent's call that carries no seal: only while attempts started by a sas from"
        " before seals may still run (an upgrade); a forged workflow's calls run too meanwhile.",
    )

    @field_validator("keys")
    @classmethod
    def _long_enough(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for n, key in enumerate(keys):
            if len(key.get_secret_value()) < 32:
                raise ValueError(f"key {n}: use at least 32 characters (e.g. openssl rand -base64 32)")
        return keys

    def secrets(self) -> list[bytes]:
        """The keys set, the sealing one first (empty: a worker derives its key)."""
        return [k.get_secret_value().encode() for k in self.keys]


class CallbackSettings(BaseModel):
    """Status events posted to a task's callback URL (the pattern's private response queue)."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected secret is not printed

    secret: SecretStr | None = Field(
        default=None,
        description="Standard Webhooks secret (whsec_<base64>): signs each post (webhook-signature); see docs/webhooks.md.",
    )

    _secret_form = field_validator("secret")(standard_webhooks_secret)
