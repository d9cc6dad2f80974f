"""Large payloads compressed in the history: a task's input of a thousand items, a fan-out
batch's items. Temporal keeps every payload of a workflow's history, and a fan-out holds its
items twice (the task's input, each batch's start); compressed, the history keeps a fraction.

Wire format: metadata ``encoding: binary/zlib``; data = zlib(the serialized payload), as the
encryption codec wraps one. Only a payload of ``COMPRESS_FROM_BYTES`` or more is compressed, and
only when that saves a tenth: the calls, results and plans of an order stay plain JSON, readable
in the Temporal UI without the codec server. Every payload that is not compressed (written by
the code before, by the raw ``temporal`` CLI, or too small) passes through decode unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/zlib"
COMPRESS_FROM_BYTES = 4096
"""The smallest payload compressed: below it, what compression saves is not worth an unreadable payload."""
MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""The most a compressed payload may inflate to: Temporal refuses a payload of 2 MB by default, so
more is not a payload sas wrote, and is refused rather than held in memory."""
_LEVEL = 6


class PayloadDecompressionError(ValueError):
    """A compressed payload that does not inflate to a payload within ``MAX_INFLATED_BYTES``."""


class CompressionCodec(PayloadCodec):
    """Compresses each payload of ``COMPRESS_FROM_BYTES`` or more that compresses by a tenth."""

    def __init__(self, from_bytes: int = COMPRESS_FROM_BYTES) -> None:
        super().__init__()
        self._from_bytes = from_bytes

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._deflate(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [_inflate(p) if p.metadata.get("encoding") == ENCODING else p for p in payloads]

    def _deflate(self, payload: Payload) -> Payload:
        if len(payload.data) < self._from_bytes:
            return payload
        whole = payload.SerializeToString()
        packed = zlib.compress(whole, _LEVEL)
        if len(packed) > len(whole) * 0.9:
            return payload  # already dense (an encrypted or random value): kept as it is
        return Payload(metadata={"encoding": ENCODING}, data=packed)


def _inflate(payload: Payload) -> Payload:
    inflater = zlib.decompressobj()
    try:
        whole = inflater.decompress(payload.data, MAX_INFLATED_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise PayloadDecompressionError(
                f"a compressed payload inflates past {MAX_INFLATED_BYTES} bytes, or is cut short"
            )
        return Payload.FromString(whole)
    except (zlib.error, DecodeError) as err:
        raise PayloadDecompressionError(f"a compressed payload does not inflate to a payload: {err}") from None


class CodecChain(PayloadCodec):
    """Codecs applied in order when writing (compress, then encrypt) and in reverse when reading."""

    def __init__(self, *codecs: PayloadCodec) -> None:
        super().__init__()
        self.codecs = codecs

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in self.codecs:
            out = await codec.encode(out)
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = list(payloads)
        for codec in reversed(self.codecs):
            out = await codec.decode(out)
        return out
