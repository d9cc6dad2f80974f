"""The client connection built from TLS / mTLS / API-key settings (what a cluster or
Temporal Cloud needs): the TLSConfig carries the files' bytes and the server name, and
connect() hands TLS, the API key and the namespace to the SDK."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from temporalio.client import Client, TLSConfig

from sas.runtime.connect import connect, tls_config
from sas.settings import Settings, TemporalSettings, TemporalTLS


def _self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def fake_connect(target_host: str, **kwargs: Any) -> str:
        seen.update(kwargs, target_host=target_host)
        return "client"

    monkeypatch.setattr(Client, "connect", fake_connect)
    return seen


def test_mtls_settings_build_a_tls_config(tmp_path: Path) -> None:
    ca, _ = _self_signed(tmp_path, "ca.example")
    cert, key = _self_signed(tmp_path, "worker.example")
    settings = TemporalSettings(
        address="temporal.example:7233",
        tls=TemporalTLS(
            enabled=True,
            server_root_ca_path=str(ca),
            client_cert_path=str(cert),
            client_key_path=str(key),
            server_name="frontend.example",
        ),
    )
    tls = tls_config(settings)
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == ca.read_bytes()
    assert tls.client_cert == cert.read_bytes()
    assert tls.client_private_key == key.read_bytes()
    assert tls.domain == "frontend.example"


def test_api_key_alone_turns_tls_on_and_plain_settings_do_not() -> None:
    assert tls_config(TemporalSettings(api_key="k-123")) is True
    assert tls_config(TemporalSettings()) is False


async def test_connect_passes_tls_api_key_and_namespace(captured: dict[str, Any], tmp_path: Path) -> None:
    ca, _ = _self_signed(tmp_path, "ca.example")
    settings = TemporalSettings(
        address="ns.acct.tmprl.cloud:7233",
        namespace="ns.acct",
        api_key="secret-key",
        tls=TemporalTLS(enabled=True, server_root_ca_path=str(ca)),
    )
    assert await connect(settings, "worker") == "client"
    assert captured["target_host"] == "ns.acct.tmprl.cloud:7233"
    assert captured["namespace"] == "ns.acct"
    assert captured["api_key"] == "secret-key"
    assert isinstance(captured["tls"], TLSConfig) and captured["tls"].server_root_ca_cert == ca.read_bytes()
    assert captured["identity"].startswith("worker-")


async def test_settings_from_the_environment_reach_the_client(
    captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path, "worker.example")
    for name, value in {
        "SAS_TEMPORAL__ADDRESS": "cluster.internal:7233",
        "SAS_TEMPORAL__NAMESPACE": "orders",
        "SAS_TEMPORAL__TLS__ENABLED": "true",
        "SAS_TEMPORAL__TLS__CLIENT_CERT_PATH": str(cert),
        "SAS_TEMPORAL__TLS__CLIENT_KEY_PATH": str(key),
        "SAS_TEMPORAL__TLS__SERVER_NAME": "cluster.internal",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # no stray .env
    settings = Settings().temporal
    await connect(settings, "supervisor")
    assert captured["target_host"] == "cluster.internal:7233" and captured["namespace"] == "orders"
    assert captured["tls"].client_cert == cert.read_bytes() and captured["tls"].client_private_key == key.read_bytes()
    assert captured["tls"].domain == "cluster.internal" and captured["api_key"] is None
