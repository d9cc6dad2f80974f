"""The AES-GCM codec on its own: round trips, key rotation, tampering, unknown keys."""

from __future__ import annotations

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes
from temporalio.exceptions import ApplicationError

from sas.payload_codec import ENCODING, KEY_ID, PayloadDecryptionError, UnknownKeyError, data_converter
from sas.payload_codec.converter import lean_data_converter
from sas.settings import EncryptionSettings
from sas_orders.models import OrderInput
from tests.encryption.conftest import codec_for, encryption_settings, new_key

SECRET_ADDRESS = "12 Plaintext Canary Road"


def plain_payloads() -> list[Payload]:
    return pydantic_data_converter.payload_converter.to_payloads([{"address": SECRET_ADDRESS}, "second", 42])


async def test_round_trip_restores_every_payload_exactly(encryption: EncryptionSettings) -> None:
    codec = codec_for(encryption)
    original = plain_payloads()
    encoded = await codec.encode(original)
    assert [p.metadata["encoding"] for p in encoded] == [ENCODING] * 3
    assert all(p.metadata[KEY_ID] == b"k1" for p in encoded)
    assert all(SECRET_ADDRESS.encode() not in p.SerializeToString() for p in encoded)
    assert await codec.decode(encoded) == original


async def test_same_plaintext_encrypts_differently_each_time(encryption: EncryptionSettings) -> None:
    codec = codec_for(encryption)
    first, second = await codec.encode(plain_payloads()[:1] * 2)
    assert first.data != second.data  # a fresh nonce per payload


async def test_rotation_old_payloads_still_decrypt_after_the_current_key_changes() -> None:
    k1, k2 = new_key(), new_key()
    before = codec_for(encryption_settings("k1", k1=k1))
    written_with_k1 = await before.encode(plain_payloads())

    after = codec_for(encryption_settings("k2", k1=k1, k2=k2))
    written_with_k2 = await after.encode(plain_payloads())
    assert {p.metadata[KEY_ID] for p in written_with_k2} == {b"k2"}
    assert await after.decode(written_with_k1) == plain_payloads()
    assert await after.decode(written_with_k2) == plain_payloads()


async def test_unknown_key_id_is_a_clear_error_naming_the_ids() -> None:
    old = await codec_for(encryption_settings("k1", k1=new_key())).encode(plain_payloads())
    retired = codec_for(encryption_settings("k2", k2=new_key()))
    with pytest.raises(UnknownKeyError, match=r"key 'k1', which is not configured \(known: k2\)"):
        await retired.decode(old)


async def test_a_different_key_under_the_same_id_fails_authentication() -> None:
    written = await codec_for(encryption_settings("k1", k1=new_key())).encode(plain_payloads())
    with pytest.raises(PayloadDecryptionError, match="failed authentication"):
        await codec_for(encryption_settings("k1", k1=new_key())).decode(written)


@pytest.mark.parametrize("where", [0, 5, 12, 20, -1])
async def test_tampered_ciphertext_is_refused(encryption: EncryptionSettings, where: int) -> None:
    codec = codec_for(encryption)
    [payload] = await codec.encode(plain_payloads()[:1])
    data = bytearray(payload.data)
    data[where] ^= 0x01  # nonce, ciphertext or tag: GCM authenticates all of it
    payload.data = bytes(data)
    with pytest.raises(PayloadDecryptionError, match="failed authentication"):
        await codec.decode([payload])


async def test_truncated_or_unlabelled_payloads_are_refused(encryption: EncryptionSettings) -> None:
    codec = codec_for(encryption)
    [payload] = await codec.encode(plain_payloads()[:1])
    short = Payload(metadata=dict(payload.metadata), data=payload.data[:8])
    with pytest.raises(PayloadDecryptionError, match="failed authentication"):
        await codec.decode([short])
    unlabelled = Payload(metadata={"encoding": ENCODING}, data=payload.data)
    with pytest.raises(PayloadDecryptionError, match="no encryption-key-id"):
        await codec.decode([unlabelled])


async def test_plaintext_payloads_pass_through_decode(encryption: EncryptionSettings) -> None:
    # Input typed into the raw `temporal` CLI, or history written before encryption was on.
    plain = plain_payloads()
    assert await codec_for(encryption).decode(plain) == plain


async def test_without_a_current_key_it_writes_plaintext_but_still_decrypts() -> None:
    k1 = new_key()
    written = await codec_for(encryption_settings("k1", k1=k1)).encode(plain_payloads())
    turning_off = codec_for(encryption_settings(None, k1=k1))
    assert await turning_off.encode(plain_payloads()) == plain_payloads()
    assert await turning_off.decode(written) == plain_payloads()


async def test_data_converter_is_plain_lean_json_when_no_keys_are_configured() -> None:
    assert data_converter(None) is lean_data_converter
    assert data_converter(EncryptionSettings()) is lean_data_converter


async def test_data_converter_round_trips_models_and_encrypts_failure_messages(encryption: EncryptionSettings) -> None:
    converter = data_converter(encryption)
    order = OrderInput(customer_id="c-1", sku="SKU-1", quantity=1, amount_cents=100, address=SECRET_ADDRESS)
    [payload] = await converter.encode([order])
    assert SECRET_ADDRESS.encode() not in payload.SerializeToString()
    assert await converter.decode([payload], [OrderInput]) == [order]

    assert isinstance(converter.failure_converter, DefaultFailureConverterWithEncodedAttributes)
    failure = Failure()
    await converter.encode_failure(ApplicationError(f"bad address {SECRET_ADDRESS}", type="InvalidInput"), failure)
    assert SECRET_ADDRESS.encode() not in failure.SerializeToString()
    assert failure.message == "Encoded failure"
    decoded = await converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError) and SECRET_ADDRESS in decoded.message


def test_key_ring_repr_shows_ids_only(encryption: EncryptionSettings) -> None:
    codec = codec_for(encryption)
    secret = encryption.keys["k1"].get_secret_value()
    assert secret not in repr(codec) and "k1" in repr(codec)
    assert str(codec.ring.keys["k1"]) not in repr(codec.ring)
