"""AES-256-GCM payload codec: order data leaves the process only as ciphertext.

Wire format (the same as Temporal's encryption samples in Go, TypeScript and Python, so
their tools can read it): metadata ``encoding: binary/encrypted`` and
``encryption-key-id: <id>``; data = 12-byte random nonce + AES-GCM(serialized payload).
The key id is what makes rotation possible: new payloads use the current key, and any
payload still decrypts while its key id is configured.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from sas.payload_codec.keys import KeyRing

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12


class PayloadDecryptionError(ValueError):
    """An encrypted payload that cannot be read with the configured keys."""


class UnknownKeyError(PayloadDecryptionError):
    """The payload names a key id this process was not given."""


class EncryptionCodec(PayloadCodec):
    """Encrypts every payload with the key ring's current key; decrypts with any known key.

    Without a current key it writes plaintext but still decrypts: the way to turn
    encryption off while histories written with it are still running or retained.
    Payloads that are not encrypted (started from the raw ``temporal`` CLI, or written
    before encryption was turned on) pass through decode unchanged.
    """

    def __init__(self, ring: KeyRing) -> None:
        super().__init__()
        self._ring = ring
        self._ciphers = {key_id: AESGCM(key) for key_id, key in ring.keys.items()}

    @property
    def ring(self) -> KeyRing:
        return self._ring

    @property
    def encrypts(self) -> bool:
        return self._ring.current_key_id is not None

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        key_id = self._ring.current_key_id
        if key_id is None:
            return list(payloads)
        cipher = self._ciphers[key_id]
        return [
            Payload(
                metadata={"encoding": ENCODING, KEY_ID: key_id.encode()},
                data=_seal(cipher, p.SerializeToString()),
            )
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._open(p) if p.metadata.get("encoding") == ENCODING else p for p in payloads]

    def _open(self, payload: Payload) -> Payload:
        key_id = payload.metadata.get(KEY_ID, b"").decode("utf-8", "replace")
        if not key_id:
            raise PayloadDecryptionError(f"encrypted payload has no {KEY_ID} metadata")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKeyError(
                f"payload was encrypted with key {key_id!r}, which is not configured "
                f"(known: {self._ring.describe_ids()}); add it to SAS_ENCRYPTION__KEYS"
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
            return Payload.FromString(plain)
        except (InvalidTag, ValueError, DecodeError):
            # InvalidTag carries no text; say what it means for an operator.
            raise PayloadDecryptionError(
                f"payload encrypted with key {key_id!r} failed authentication: it was altered, "
                "or the key configured under that id is not the one it was written with"
            ) from None

    def __repr__(self) -> str:
        return f"EncryptionCodec({self._ring!r})"


def _seal(cipher: AESGCM, plain: bytes) -> bytes:
    # A fresh random 96-bit nonce per payload: safe for far more payloads than one key
    # will see before it is rotated (NIST SP 800-38D's 2^32 bound).
    nonce = os.urandom(NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, plain, None)
