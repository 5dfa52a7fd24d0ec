"""How the local-docker driver reaches an engine, without one: keyUsage detection, API version choice,
deadlines, the DOCKER_API_VERSION setting, failure descriptions and stop reasons."""

from __future__ import annotations

import datetime as dt
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduler.config import Settings
from scheduler.deadline import Deadline, or_never
from scheduler.errors import ConfigurationError
from scheduler.providers.docker_engine import api_versions
from scheduler.providers.docker_engine.failures import describe
from scheduler.providers.docker_engine.tls import (
    TlsFiles,
    TlsMaterialError,
    certificates_without_key_usage,
    client_context,
    has_key_usage,
)
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.providers.local_docker.states import reason_from_state

ENGINE_20_10 = {"Version": "20.10.24+dfsg1", "ApiVersion": "1.41", "MinAPIVersion": "1.12"}
ENGINE_29 = {"Version": "29.0.0", "ApiVersion": "1.52", "MinAPIVersion": "1.44"}


def _ca(*, key_usage: bool) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if key_usage:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    return builder.sign(key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


# --- keyUsage, read from the DER without cryptography ----------------------------------------------


def test_a_ca_with_key_usage_is_recognised() -> None:
    assert has_key_usage(_ca(key_usage=True).public_bytes(serialization.Encoding.DER))


def test_a_ca_without_key_usage_is_recognised() -> None:
    assert not has_key_usage(_ca(key_usage=False).public_bytes(serialization.Encoding.DER))


def test_each_certificate_of_a_bundle_is_checked() -> None:
    bundle = _pem(_ca(key_usage=True)) + _pem(_ca(key_usage=False)) + _pem(_ca(key_usage=True))
    assert certificates_without_key_usage(bundle) == [2]


def test_a_truncated_certificate_is_malformed_not_missing_key_usage() -> None:
    der = _ca(key_usage=True).public_bytes(serialization.Encoding.DER)
    with pytest.raises(ValueError):
        has_key_usage(der[:40])


def test_a_bundle_block_that_is_not_a_certificate_is_skipped() -> None:
    junk = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
    assert certificates_without_key_usage(junk + _pem(_ca(key_usage=False))) == [2]


def _tls_directory(directory: Path, *, key_password: bytes | None = None) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    ca = _ca(key_usage=True)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    encryption = serialization.BestAvailableEncryption(key_password) if key_password else serialization.NoEncryption()
    directory.mkdir()
    (directory / "ca.pem").write_text(_pem(ca))
    (directory / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    return directory


def test_tls_files_load_into_a_context_that_verifies_and_checks_names(tmp_path: Path) -> None:
    context = client_context(TlsFiles.in_directory(_tls_directory(tmp_path / "tls")))

    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert not context.verify_flags & ssl.VERIFY_X509_STRICT
    assert context.hostname_checks_common_name is False


def test_a_passphrase_protected_client_key_is_refused_without_a_prompt(tmp_path: Path) -> None:
    directory = _tls_directory(tmp_path / "tls", key_password=b"secret")

    with pytest.raises(TlsMaterialError, match="protected by a passphrase"):
        client_context(TlsFiles.in_directory(directory))


def test_missing_tls_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(TlsMaterialError, match=r"lacks ca\.pem, cert\.pem, key\.pem"):
        client_context(TlsFiles.in_directory(tmp_path))


# --- API version choice ----------------------------------------------------------------------------


def test_engine_20_10_gets_its_newest_version() -> None:
    assert api_versions.choose(ENGINE_20_10, newest_supported="1.45") == "1.41"


def test_engine_29_gets_the_newest_version_this_driver_speaks() -> None:
    assert api_versions.choose(ENGINE_29, newest_supported="1.45") == "1.45"


def test_versions_compare_as_numbers_not_text() -> None:
    assert api_versions.choose({"ApiVersion": "1.9", "MinAPIVersion": "1.9"}, "1.45", oldest_supported="1.9") == "1.9"
    assert api_versions.choose({"ApiVersion": "1.100", "MinAPIVersion": "1.44"}, "1.45") == "1.45"


@pytest.mark.parametrize("version", ["\uff11.\uff14\uff11", "1.\u0664\u0661", "1.41.0", "v1.41"])
def test_an_api_version_is_ascii_digits_dot_digits_only(version: str) -> None:
    assert not api_versions.is_version(version)
    with pytest.raises(ValueError, match="is not an API version"):
        api_versions.parse(version)


def test_an_engine_older_than_20_10_is_refused_with_what_to_upgrade() -> None:
    with pytest.raises(api_versions.ApiVersionMismatch, match=r"upgrade the Docker engine to 20\.10"):
        api_versions.choose({"Version": "19.03.15", "ApiVersion": "1.40", "MinAPIVersion": "1.12"}, "1.45")


def test_an_engine_whose_floor_is_above_this_driver_names_the_pin_to_try() -> None:
    future = {"Version": "31.0.0", "ApiVersion": "1.56", "MinAPIVersion": "1.46"}
    with pytest.raises(api_versions.ApiVersionMismatch, match=r"DOCKER_API_VERSION=1\.46"):
        api_versions.choose(future, "1.45")


def test_an_engine_without_a_min_version_is_taken_at_its_own() -> None:
    assert api_versions.choose({"ApiVersion": "1.43"}, "1.45") == "1.43"


def test_a_version_answer_without_api_version_is_refused() -> None:
    with pytest.raises(api_versions.ApiVersionMismatch, match="no ApiVersion"):
        api_versions.choose({"Version": "?"}, "1.45")


# --- DOCKER_API_VERSION --------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "auto", "AUTO"])
def test_an_empty_or_auto_docker_api_version_negotiates(raw: str) -> None:
    assert docker_settings({"DOCKER_API_VERSION": raw}).docker_api_version is None


def test_a_docker_api_version_pins_it() -> None:
    assert docker_settings({"DOCKER_API_VERSION": "1.44"}).docker_api_version == "1.44"


def docker_settings(environ: dict[str, str]) -> LocalDockerSettings:
    """The local-docker settings as the functions parse them (PROVIDERS names local-docker by default)."""
    return Settings.from_environ(environ).section("local-docker", LocalDockerSettings)


@pytest.mark.parametrize("raw", ["v1.44", "1", "1.44.0", "latest"])
def test_a_malformed_docker_api_version_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="DOCKER_API_VERSION"):
        Settings.from_environ({"DOCKER_API_VERSION": raw})


# --- deadlines -------------------------------------------------------------------------------------


class _Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_an_invocations_deadline_keeps_the_reserve_for_answering() -> None:
    assert Deadline.of_invocation(_Context(30_000), reserve_seconds=5).remaining() == pytest.approx(25, abs=0.2)


def test_an_invocations_deadline_is_capped_by_at_most() -> None:
    deadline = Deadline.of_invocation(_Context(900_000), reserve_seconds=5, at_most_seconds=30)
    assert deadline.remaining() == pytest.approx(25, abs=0.2)


def test_a_context_without_remaining_time_is_capped_only_by_at_most() -> None:
    assert Deadline.of_invocation(object(), reserve_seconds=5, at_most_seconds=30).remaining() == pytest.approx(
        25, abs=0.2
    )
    assert Deadline.of_invocation(None, reserve_seconds=5).remaining() == float("inf")


def test_a_deadline_bounds_a_call_timeout_and_can_only_come_sooner() -> None:
    deadline = Deadline.within(2)
    assert deadline.bound(20) == pytest.approx(2, abs=0.1)
    assert deadline.bound(0.5) == 0.5
    assert deadline.sooner(60).at == deadline.at
    assert deadline.sooner(1).remaining() == pytest.approx(1, abs=0.1)


def test_a_passed_deadline_has_nothing_left() -> None:
    deadline = Deadline(time.monotonic() - 1)
    assert deadline.expired and deadline.remaining() == 0


def test_no_deadline_means_no_limit() -> None:
    assert or_never(None).remaining() == float("inf")


# --- failure descriptions --------------------------------------------------------------------------


def _verification_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    error.verify_code, error.verify_message = code, message
    return error


def test_a_hostname_mismatch_names_the_host_and_the_fix() -> None:
    error = _verification_error(64, "IP address mismatch, certificate is not valid for '10.0.0.7'.")
    text = describe(error, "tcp://10.0.0.7:2376", "/certs")
    assert text.startswith("host name mismatch: the Docker host's certificate does not name 10.0.0.7")
    assert "subjectAltName" in text


def test_an_expired_certificate_says_so_and_how_to_renew() -> None:
    text = describe(_verification_error(10, "certificate has expired"), "tcp://docker:2376", "/certs")
    assert "certificate has expired" in text and "scripts/docker-host-certs" in text


def test_a_wrong_ca_names_the_ca_file() -> None:
    text = describe(_verification_error(20, "unable to get local issuer certificate"), "tcp://docker:2376", "/certs")
    assert "not signed by /certs/ca.pem" in text


def test_a_refused_client_certificate_names_our_certificate() -> None:
    error = ssl.SSLError(1, "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate")
    error.reason = "SSLV3_ALERT_BAD_CERTIFICATE"  # type: ignore[misc]
    assert "refused our client certificate" in describe(error, "tcp://docker:2376", "/certs")


def test_a_refused_connection_names_the_address() -> None:
    assert describe(ConnectionRefusedError(111, "refused"), "tcp://docker:2376").startswith(
        "connection refused by docker:2376"
    )


# --- why a worker stopped --------------------------------------------------------------------------


def _state(**fields: Any) -> dict[str, Any]:
    return {"Status": "exited", "ExitCode": 0, "OOMKilled": False, "FinishedAt": "2026-11-30T04:05:06.123Z", **fields}


def test_a_killed_worker_names_its_exit_code_signal_and_time() -> None:
    assert reason_from_state(_state(ExitCode=137)) == (
        "the worker container exited with code 137, SIGKILL at 2026-11-30T04:05:06Z"
    )


def test_an_oom_killed_worker_says_so() -> None:
    assert "killed by the kernel's OOM killer" in str(reason_from_state(_state(ExitCode=137, OOMKilled=True)))


def test_a_crashed_worker_names_its_exit_code() -> None:
    assert reason_from_state(_state(ExitCode=1)) == "the worker container exited with code 1 at 2026-11-30T04:05:06Z"


def test_a_dead_worker_carries_the_engines_error() -> None:
    assert reason_from_state({"Status": "dead", "Error": "driver failed"}) == (
        "the worker container is dead (the engine could not stop or remove it): driver failed"
    )


def test_a_running_worker_has_no_stop_reason() -> None:
    assert reason_from_state({"Status": "running", "Running": True}) is None
    assert reason_from_state({"Status": "paused", "Paused": True}) is None
