"""scripts/check-docker-host against real engines: a good host, one made as Docker's guide shows, and the
mistakes users make (wrong CA, a name the certificate lacks, no image, nothing listening)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

from devstack.check_docker_host import main
from devstack.docker_tls import generate_untrusted_client
from devstack.worker_image import WORKER_IMAGES
from tests.support.engine29_proxy import Engine29Proxy
from tests.support.silent_engine import SilentEngine

REPO = Path(__file__).resolve().parents[2]
IMAGE = WORKER_IMAGES["renderer"]


def _check(environment: dict[str, str], *arguments: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["--image", IMAGE, "--timeout", "5", *arguments], environment=environment, out=out)
    return status, out.getvalue()


def _lines(report: str, level: str) -> list[str]:
    return [line.strip() for line in report.splitlines() if line.strip().startswith(level)]


def test_a_good_host_passes_every_check(docker_host: Any) -> None:
    status, report = _check(docker_host.env())

    assert status == 0, report
    assert _lines(report, "FAIL") == [] and _lines(report, "warn") == []
    assert "engine: Docker 20.10" in report and "the service will speak API 1.41 (negotiated)" in report
    assert f"created, started and removed a container from {IMAGE}" in report
    assert report.rstrip().endswith("The host works with the service.")


def test_a_host_made_as_dockers_guide_shows_works_with_a_key_usage_warning(docs_style_host: Any) -> None:
    status, report = _check(docs_style_host.env())

    assert status == 0, report
    (warning,) = _lines(report, "warn")
    assert "ca.pem has no keyUsage extension" in warning
    assert "scripts/docker-host-certs" in report
    assert "created, started and removed a container" in report


def test_a_wrong_ca_fails_naming_the_certificate_and_the_fix(docker_host: Any, tmp_path: Path) -> None:
    wrong = generate_untrusted_client(tmp_path / "wrong-ca")
    for name in ("cert.pem", "key.pem"):
        shutil.copyfile(Path(docker_host.cert_path) / name, wrong / name)

    status, report = _check({**docker_host.env(), "DOCKER_CERT_PATH": str(wrong)})

    assert status == 1
    failures = "\n".join(_lines(report, "FAIL"))
    assert "server certificate" in failures and "not signed by ca.pem" in failures
    assert (
        "TLS verification of the Docker host's certificate failed: unable to get local issuer certificate" in failures
    )
    assert "fix: use the ca.pem that signed the daemon's server-cert.pem" in report
    assert "The host does NOT work with the service" in report


def test_cert_path_option_replaces_docker_cert_path(docker_host: Any, tmp_path: Path) -> None:
    status, report = _check({"DOCKER_HOST": docker_host.host}, "--cert-path", str(docker_host.cert_path))

    assert status == 0, report
    assert f"certificates in {docker_host.cert_path}" in report


def test_a_host_name_missing_from_the_server_certificate_is_named(docker_host: Any) -> None:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path), address="127.0.0.2").start()
    try:
        status, report = _check(proxy.env())
    finally:
        proxy.stop()

    assert status == 1
    assert any("it does not name 127.0.0.2" in line for line in _lines(report, "FAIL"))
    assert any(line.startswith("FAIL  host name mismatch") for line in _lines(report, "FAIL"))


def test_engine_29s_api_range_and_the_version_the_service_will_speak_are_shown(docker_host: Any) -> None:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path)).start()
    try:
        status, report = _check(proxy.env())
    finally:
        proxy.stop()

    assert status == 0, report
    assert "engine: Docker 29.0.0" in report and "API 1.44–1.52; the service will speak API 1.45 (negotiated)" in report


def test_a_missing_image_fails_with_how_to_get_it_there(docker_host: Any) -> None:
    status, report = _check(docker_host.env(), "--image", "openalice/not-there:1")

    assert status == 1
    assert "image missing: openalice/not-there:1 is not on the host" in report
    assert "fix: on the host: docker pull openalice/not-there:1" in report


def test_nothing_listening_fails_with_connection_refused(docker_host: Any) -> None:
    with SilentEngine() as silent:
        port = silent.port
    status, report = _check({**docker_host.env(), "DOCKER_HOST": f"tcp://127.0.0.1:{port}"})

    assert status == 1
    assert f"connection refused by 127.0.0.1:{port}" in report


def test_missing_certificate_files_fail_before_connecting(docker_host: Any, tmp_path: Path) -> None:
    status, report = _check({**docker_host.env(), "DOCKER_CERT_PATH": str(tmp_path)})

    assert status == 1
    assert "lacks ca.pem, cert.pem, key.pem" in report
    assert "connected to" not in report


def test_the_script_runs_the_check_and_exits_non_zero_on_failure(docker_host: Any, tmp_path: Path) -> None:
    completed = subprocess.run(
        [str(REPO / "scripts" / "check-docker-host"), "--image", IMAGE, "--cert-path", str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", "DOCKER_HOST": docker_host.host},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 1
    assert "The host does NOT work with the service" in completed.stdout


def test_every_host_of_a_fleet_is_checked_and_one_that_fails_fails_the_check(docker_host: Any) -> None:
    import json

    with SilentEngine() as silent:
        fleet = [
            {"name": "good", "host": docker_host.host, "cert_path": str(docker_host.cert_path)},
            {"name": "frozen", "host": silent.host, "cert_path": str(docker_host.cert_path)},
        ]
        status, report = _check({"DOCKER_HOSTS": json.dumps(fleet)}, "--timeout", "2")

    assert status == 1
    assert f"== good: checking the Docker host {docker_host.host}" in report
    assert f"== frozen: checking the Docker host {silent.host}" in report
    assert report.rstrip().endswith("Fleet: good works, frozen FAILS")
