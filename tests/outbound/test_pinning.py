"""The connection goes to the checked address, and the request still belongs to the name: the
Host header, TLS SNI and the certificate check use the name the URL gave (issue 13, item 5)."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sas.activities.outbound import pinned_client
from sas.task_models.outbound import OutboundRefused
from sas_demo_services.launcher import free_port
from tests.helpers import wait_until
from tests.outbound.test_ssrf import HTTP_BUT_PUBLIC, loopback_name
from tests.stack import DEV_OUTBOUND


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca_and_server_cert(folder: Path, host: str) -> tuple[Path, Path, Path]:
    """A test CA, and a server certificate it signed for ``host`` only (no IP address in it)."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("sas test CA"))
        .issuer_name(_name("sas test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


async def test_https_to_a_name_connects_to_its_checked_address_with_the_names_host_and_sni(tmp_path: Path) -> None:
    name = loopback_name()  # resolves to 127.0.0.1 through the system resolver
    ca, cert, key = make_ca_and_server_cert(tmp_path, name)
    hosts: list[str] = []

    async def hook(request: Request) -> JSONResponse:
        hosts.append(request.headers["host"])
        return JSONResponse({"ok": True})

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/hook", hook, methods=["POST"])]),
            host="127.0.0.1",
            port=port,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_level="warning",
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: asyncio.sleep(0, server.started), what="TLS receiver up")
        trust = ssl.create_default_context(cafile=str(ca))
        async with pinned_client(DEV_OUTBOUND, verify=trust) as http:
            # The certificate names only the host: it verifies because SNI and the check use the
            # name, although the socket was opened to the address the name resolved to.
            response = await http.post(f"https://{name}:{port}/hook")
            assert response.status_code == 200 and hosts == [f"{name}:{port}"]
            # The same server by address: the certificate does not match, so the name is what counted.
            with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|match"):
                await http.post(f"https://127.0.0.1:{port}/hook")
        # And under the strict setting that name is never connected to at all.
        async with pinned_client(HTTP_BUT_PUBLIC, verify=trust) as http:
            with pytest.raises(OutboundRefused, match="loopback"):
                await http.post(f"https://{name}:{port}/hook")
        assert len(hosts) == 1
    finally:
        server.should_exit = True
        await task
