"""Large payloads go to the history compressed (``sas/payload_codec/compression.py``): a payload
of 4 KiB or more that compresses by a tenth, then encrypted when keys are set; everything
smaller, denser, or written before, reads back unchanged; what does not inflate to a payload
within its bound is refused, never held in memory."""

from __future__ import annotations

import os
import zlib

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from sas.payload_codec.codec import ENCODING as ENCRYPTED
from sas.payload_codec.compression import (
    COMPRESS_FROM_BYTES,
    ENCODING,
    MAX_INFLATED_BYTES,
    CodecChain,
    CompressionCodec,
    PayloadDecompressionError,
)
from sas.payload_codec.converter import codec_of, data_converter
from tests.encryption.conftest import encryption_settings

ITEMS = {"recipients": [{"id": f"r{n:05d}", "cents": 100 + n} for n in range(1000)]}


def payload(value: object) -> Payload:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0]


async def test_a_large_payload_is_compressed_and_reads_back_as_it_was() -> None:
    plain = payload(ITEMS)
    [packed] = await CompressionCodec().encode([plain])
    assert packed.metadata["encoding"] == ENCODING
    assert len(packed.data) < len(plain.data) / 5
    assert await CompressionCodec().decode([packed]) == [plain]


async def test_a_small_a_dense_and_an_old_payload_pass_as_they_are() -> None:
    small = payload({"sku": "S-1"})
    dense = Payload(metadata={"encoding": b"binary/plain"}, data=os.urandom(COMPRESS_FROM_BYTES * 2))
    assert await CompressionCodec().encode([small, dense]) == [small, dense]
    # Written by the code before (or the raw temporal CLI): never compressed, read as it is.
    assert await CompressionCodec().decode([payload(ITEMS)]) == [payload(ITEMS)]


async def test_with_keys_a_large_payload_is_compressed_then_encrypted() -> None:
    codec = codec_of(encryption_settings())
    assert isinstance(codec, CodecChain)
    plain = payload(ITEMS)
    [sealed] = await codec.encode([plain])
    assert sealed.metadata["encoding"] == ENCRYPTED
    assert len(sealed.data) < len(plain.data) / 5  # compressed before it was sealed
    assert await codec.decode([sealed]) == [plain]
    # A payload encrypted by the code before (not compressed) still reads.
    [old] = await codec.codecs[1].encode([plain])
    assert await codec.decode([old]) == [plain]


@pytest.mark.parametrize(
    "data",
    [zlib.compress(b"\0" * (MAX_INFLATED_BYTES + 1)), b"not zlib at all", zlib.compress(b"\xff\xff not a payload")],
    ids=["inflates past its bound", "not zlib", "not a payload"],
)
async def test_what_does_not_inflate_to_a_payload_is_refused(data: bytes) -> None:
    with pytest.raises(PayloadDecompressionError):
        await CompressionCodec().decode([Payload(metadata={"encoding": ENCODING}, data=data)])


async def test_sas_s_converter_compresses_a_thousand_items_and_reads_them_back() -> None:
    converter = data_converter(None)
    [written] = await converter.encode([ITEMS])
    assert written.metadata["encoding"] == ENCODING
    assert await converter.decode([written], [dict]) == [ITEMS]
