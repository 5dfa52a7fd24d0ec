"""scripts/docker-host-certs: the operator's CA, server and client certificates work for a real dockerd
behind mutual TLS, reached the way the deployed functions reach it (the Secrets Manager JSON)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from tests.conftest import require_docker
from tests.sam.conftest import REPO

SCRIPT = REPO / "scripts" / "docker-host-certs"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("docker-tls") / "certs"
    result = subprocess.run(
        [str(SCRIPT), "--host", "localhost", "--ip", "127.0.0.1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_writes_the_ca_server_and_client_material_private_keys_private(certs: tuple[Path, str]) -> None:
    out, _ = certs
    for name in ("ca.pem", "server-cert.pem", "cert.pem", "daemon.json"):
        assert (out / name).is_file(), name
    for name in ("ca-key.pem", "server-key.pem", "key.pem", "docker-tls-secret.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name


def test_prints_the_daemon_json_it_needs(certs: tuple[Path, str]) -> None:
    out, printed = certs
    daemon = json.loads((out / "daemon.json").read_text())

    assert daemon["tlsverify"] is True
    assert daemon["hosts"] == ["unix:///var/run/docker.sock", "tcp://0.0.0.0:2376"]
    assert {daemon["tlscacert"], daemon["tlscert"], daemon["tlskey"]} == {
        "/etc/docker/tls/ca.pem",
        "/etc/docker/tls/server-cert.pem",
        "/etc/docker/tls/server-key.pem",
    }
    assert '"tlsverify": true' in printed
    assert "aws secretsmanager create-secret" in printed
    assert "DockerTlsSecretArn=" in printed


def test_the_secret_holds_the_client_side_only(certs: tuple[Path, str]) -> None:
    out, _ = certs
    secret = json.loads((out / "docker-tls-secret.json").read_text())

    assert set(secret) == {"ca", "cert", "key", "host"}
    assert secret["ca"] == (out / "ca.pem").read_text()
    assert secret["cert"] == (out / "cert.pem").read_text()
    assert secret["key"] == (out / "key.pem").read_text()
    assert secret["host"] == "tcp://localhost:2376"
    assert (out / "ca-key.pem").read_text() not in json.dumps(secret)


def test_a_real_dockerd_with_them_admits_the_client_and_refuses_others(
    certs: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_docker()
    from devstack.docker_host import start_tls_docker_host
    from devstack.docker_tls import generate_untrusted_client
    from scheduler.providers.docker_engine.client import connect

    out, _ = certs
    state_dir = tmp_path / "dockerd"
    (state_dir / "certs").mkdir(parents=True, mode=0o700)
    for name in ("ca.pem", "ca-key.pem", "server-cert.pem", "server-key.pem", "cert.pem", "key.pem"):
        (state_dir / "certs" / name).write_bytes((out / name).read_bytes())
    host = start_tls_docker_host(state_dir)
    try:
        # The dev host kept the operator's certificates rather than generating its own.
        assert (host.cert_path / "server-cert.pem").read_bytes() == (out / "server-cert.pem").read_bytes()
        # As the functions do with the secret: its PEMs in a directory, DOCKER_TLS_VERIFY, the host.
        secret = json.loads((out / "docker-tls-secret.json").read_text())
        client_dir = tmp_path / "client"
        client_dir.mkdir()
        for name, key in (("ca.pem", "ca"), ("cert.pem", "cert"), ("key.pem", "key")):
            (client_dir / name).write_text(secret[key])
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
        environment = {"DOCKER_HOST": host.host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(client_dir)}
        client: Any = connect(environment)
        assert client.ping() is True
        client.close()

        stranger = generate_untrusted_client(tmp_path / "stranger", server_ca=out / "ca.pem")
        refused: Any = connect({**environment, "DOCKER_CERT_PATH": str(stranger)})
        with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError, docker.errors.APIError)):
            refused.ping()
        refused.close()
    finally:
        host.stop()
    assert os.path.exists(out / "ca.pem")
