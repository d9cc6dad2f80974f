"""Payload encryption for sas: an AES-GCM codec with rotating keys, the data converter
that uses it, and the codec server the Temporal UI and CLI call to show decrypted data.
See docs/security.md."""

from __future__ import annotations

from sas.payload_codec.codec import ENCODING, KEY_ID, EncryptionCodec, PayloadDecryptionError, UnknownKeyError
from sas.payload_codec.converter import data_converter
from sas.payload_codec.keys import KeyRing

__all__ = [
    "ENCODING",
    "KEY_ID",
    "EncryptionCodec",
    "KeyRing",
    "PayloadDecryptionError",
    "UnknownKeyError",
    "data_converter",
]
