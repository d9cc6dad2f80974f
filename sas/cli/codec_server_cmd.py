"""``sas codec-server``: decrypt payloads for the Temporal UI and CLI, with sas's keys."""

from __future__ import annotations

import typer

from sas.cli import context
from sas.cli.output import console, shown

DEFAULT_UI_ORIGINS = ["http://localhost:8233", "http://127.0.0.1:8233"]


def register(app: typer.Typer) -> None:
    app.command("codec-server")(codec_server)


def codec_server(
    port: int = typer.Option(8234, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", help="Address to bind. Anyone who reaches it can decrypt: keep it private."),
    ui_origin: list[str] = typer.Option(
        DEFAULT_UI_ORIGINS, "--ui-origin", help="Temporal UI origin allowed to call it (repeat for several)."
    ),
) -> None:
    """Serve /encode and /decode so the Temporal UI shows sas's payloads decrypted and inflated
    (see docs/security.md)."""
    import uvicorn

    from sas.payload_codec import KeyRing
    from sas.payload_codec.converter import codec_of
    from sas.payload_codec.server import build_codec_app
    from sas.runtime.logs import configure_logging

    settings = context.settings()
    configure_logging(settings.log_level)
    codec = codec_of(settings.encryption)
    # Without keys it still inflates the large payloads sas compresses (sas/payload_codec/compression.py).
    what = repr(KeyRing.from_settings(settings.encryption)) if settings.encryption.enabled else "compression only"
    endpoint = f"http://{host}:{port}"
    console.print(f"codec server on {shown(endpoint)} ({shown(what)}), for {shown(', '.join(ui_origin))}")
    console.print(f"  Temporal UI: Settings (top right) > Codec Server > {shown(endpoint)}")
    console.print(f"  temporal CLI: --codec-endpoint {shown(endpoint)}")
    # log_config=None: uvicorn's loggers go through sas's JSON root handler.
    uvicorn.run(build_codec_app(codec, ui_origin), host=host, port=port, log_config=None)
