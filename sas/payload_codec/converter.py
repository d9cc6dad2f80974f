"""The data converter every sas client and worker uses."""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes

from sas.payload_codec.codec import EncryptionCodec
from sas.payload_codec.keys import KeyRing
from sas.settings import EncryptionSettings


def data_converter(settings: EncryptionSettings | None) -> DataConverter:
    """Pydantic JSON, encrypted when keys are configured.

    With encryption on, failures' messages and stack traces are moved into an encrypted
    attribute too (Temporal's ``encode_common_attributes``): a validation error quotes the
    input it rejected, so a plain failure message would put order data back in clear.
    The history then shows "Encoded failure"; the codec server shows the real text.
    """
    if settings is None or not settings.enabled:
        return pydantic_data_converter
    codec = EncryptionCodec(KeyRing.from_settings(settings))
    if not codec.encrypts:
        # Decrypt-only (turning encryption off): encoded failures still decode either way.
        return dataclasses.replace(pydantic_data_converter, payload_codec=codec)
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
