"""Who acts and why, as the commands take them (``--by``, ``--reason``): checked at once, before
anything is asked of Temporal, against the audit log's bounds (``sas.client.audit``, which also
writes the entries of the actions no workflow applies). A bad value is a usage error (exit 2)."""

from __future__ import annotations

from sas.cli.output import CliError


def actor(by: str | None) -> str:
    """Who is acting: ``--by``, else the login name, marked as coming through sas; refused in
    one line when it is longer than the log keeps or holds a control character."""
    from sas.client import audit
    from sas.client.errors import InvalidInput

    try:
        return audit.check_actor(by, "--by")
    except InvalidInput as err:
        raise CliError(err.message, code=2) from None


def check_reason(reason: str) -> str:
    """``--reason`` within the log's bound, without control characters (one line if not)."""
    from sas.client import audit
    from sas.client.errors import InvalidInput

    try:
        return audit.check_reason(reason, "--reason")
    except InvalidInput as err:
        raise CliError(err.message, code=2) from None
