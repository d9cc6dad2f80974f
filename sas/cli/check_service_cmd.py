"""``sas check-service``: a team's running service driven through every clause of sas's HTTP
contract, one line per clause (``--json`` for machines); exit 1 when any clause fails.

The checks are ``sas.conformance``'s, the same that ``sas.api.contract.check_service`` runs in a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, console, print_json, shown

# A sample body or input is a few fields; more is a mistake, not a body.
MAX_JSON_CHARS = 64 * 1024


def register(app: typer.Typer) -> None:
    app.command("check-service")(check_service)


def check_service(
    name: str = typer.Argument(
        ..., help="The service's name, as declared: Service(\"flights\"); a team's by its scoped name, north.flights."
    ),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Its base URL; default: SAS_SERVICES__<NAME>__URL (a team's: SAS_TEAMS__<TEAM>__SERVICES__<NAME>__URL).",
    ),
    input_json: str | None = typer.Option(
        None,
        "--input-json",
        help="A sample task input (a JSON object, or @FILE) for what a call takes from the input (body, path...).",
    ),
    refusing: str | None = typer.Option(
        None,
        "--refusing",
        help="Fields (a JSON object) that make the service refuse the forward for good, laid over the"
        " sample input (or --body-json); without it the refusal is not exercised.",
    ),
    forward: str | None = typer.Option(
        None, "--forward", help="Hand-written Agents: the forward call's path (its body: --body-json)."
    ),
    body_json: str | None = typer.Option(
        None, "--body-json", help='With --forward: a body it accepts (or @FILE); "{task_id}" stands for the task id.'
    ),
    undo: str | None = typer.Option(None, "--undo", help="With --forward: the undo's path."),
    undo_body_json: str | None = typer.Option(
        None,
        "--undo-body-json",
        help='With --undo: its body; "{forward_key}" is the forward\'s key, "{forward.FIELD}" a field of its answer.',
    ),
    lookup: str | None = typer.Option(None, "--lookup", help="With --forward: the lookup's path (default: declared)."),
    no_lookup: bool = typer.Option(False, "--no-lookup", help="With --forward: the service has no lookup."),
    fault_token_file: Path | None = typer.Option(
        None,
        "--fault-token-file",
        help="A file holding the /admin token of the demo services (.sas/admin-token): the forward is"
        " slowed through their fault API to exercise the in-flight race.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check a running service against sas's HTTP contract, clause by clause (docs/http-contract.md)."""
    from sas.conformance import ExplicitCalls, ServiceCheckError, builtin_services_slowdown
    from sas.conformance import check_service as run_check

    calls = _explicit(forward, body_json, undo, undo_body_json, lookup, no_lookup)
    sample = _json_object("--input-json", input_json)
    refused = _json_object("--refusing", refusing)
    settings = context.settings()
    service = settings.services.service(name)
    headers = {service.auth_header: service.auth_token.get_secret_value()} if service.auth_token else None
    slow = builtin_services_slowdown(_token(fault_token_file)) if fault_token_file is not None else None
    try:
        report = context.run(
            lambda: run_check(
                name,
                url or service.url,
                calls=ExplicitCalls(**calls) if calls is not None else None,
                sample_input=sample,
                refusing=refused,
                slow_forward=slow,
                headers=headers,
            )
        )
    except ServiceCheckError as err:
        raise CliError(str(err), code=2 if err.bad_input else 1) from None
    if as_json:
        print_json({**report.model_dump(mode="json"), "ok": report.ok})
    else:
        width = max(console.width, 40)
        for line in report.lines(width):
            console.print(shown(line), highlight=False, soft_wrap=True)
        console.print(shown(report.summary()), highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


def _explicit(
    forward: str | None,
    body_json: str | None,
    undo: str | None,
    undo_body_json: str | None,
    lookup: str | None,
    no_lookup: bool,
) -> dict[str, Any] | None:
    """The ``ExplicitCalls`` fields the flags give, or None when the calls are derived."""
    if forward is None:
        given = [f for f, v in (("--body-json", body_json), ("--undo", undo), ("--lookup", lookup)) if v is not None]
        given += ["--undo-body-json"] if undo_body_json is not None else []
        given += ["--no-lookup"] if no_lookup else []
        if given:
            raise CliError(f"{', '.join(given)}: only with --forward PATH", code=2)
        return None
    body = _json_object("--body-json", body_json)
    if body is None:
        raise CliError("--forward needs --body-json: a body the service accepts", code=2)
    if undo_body_json is not None and undo is None:
        raise CliError("--undo-body-json goes with --undo PATH", code=2)
    if lookup is not None and no_lookup:
        raise CliError("--lookup and --no-lookup: give one", code=2)
    fields: dict[str, Any] = {"forward": forward, "body": body, "undo": undo}
    fields["undo_body"] = _json_object("--undo-body-json", undo_body_json) or {}
    if no_lookup:
        fields["lookup"] = None
    elif lookup is not None:
        fields["lookup"] = lookup
    return fields


def _json_object(flag: str, text: str | None) -> dict[str, Any] | None:
    """The flag's JSON object: given inline, or ``@PATH`` for a file's."""
    from sas.task_models.strict_json import StrictJsonError, loads_strict

    if text is None:
        return None
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise CliError(f"{flag} {shown(text)}: {getattr(err, 'strerror', None) or err}", code=2) from None
    if len(text) > MAX_JSON_CHARS:
        raise CliError(f"{flag}: at most {MAX_JSON_CHARS:,} characters", code=2)
    try:
        value = loads_strict(text)
    except StrictJsonError as err:
        raise CliError(f"{flag} is not JSON: {err}", code=2) from None
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object", code=2)
    return value


def _token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise CliError(f"--fault-token-file {shown(path)}: {err.strerror or err}", code=2) from None
    if not token:
        raise CliError(f"--fault-token-file {shown(path)} is empty", code=2)
    return token
