"""Checks the settings of more than one group share: the Standard Webhooks secret of the alert
webhook and the callbacks. (Names of services and task types take ``sas.task_models.ids.NAME``.)"""

from __future__ import annotations

import base64
import binascii

from pydantic import SecretStr

_SECRET_PREFIX = "whsec_"
_NEW_SECRET = "python -c \"import base64,os; print('whsec_' + base64.b64encode(os.urandom(32)).decode())\""


def standard_webhooks_secret(value: SecretStr | None) -> SecretStr | None:
    """A Standard Webhooks signing secret: ``whsec_`` and the base64 of 24 to 64 random bytes."""
    if value is None:
        return None
    raw = value.get_secret_value()
    # Never echo the value: a near-miss of a secret is still most of a secret.
    if not raw.startswith(_SECRET_PREFIX):
        raise ValueError(f"must be a Standard Webhooks secret, whsec_<base64>; make one with: {_NEW_SECRET}")
    try:
        key = base64.b64decode(raw[len(_SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the part after whsec_ is not valid base64; make one with: {_NEW_SECRET}") from None
    if not 24 <= len(key) <= 64:
        raise ValueError(f"the key decodes to {len(key)} bytes; use 24 to 64 random bytes ({_NEW_SECRET})")
    return value
