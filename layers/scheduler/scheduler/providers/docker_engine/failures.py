"""What went wrong talking to a Docker host, in words an operator can act on.

requests wraps the cause several layers deep (SSLError → MaxRetryError → urllib3 SSLError →
ssl.SSLCertVerificationError); this walks the chain and names the failure: TLS verification of
the host's certificate (and why), host name mismatch, our client certificate refused, connection
refused, name resolution, timeout, API version refused.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from urllib.parse import urlparse

import requests
from docker.errors import APIError, DockerException

from scheduler.providers.docker_engine.api_versions import ApiVersionMismatch
from scheduler.providers.docker_engine.tls import TlsMaterialError

# A call that got no answer from the host: refused, reset, unresolvable, or out of time.
CONNECTION_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)
# OpenSSL's X509_V_ERR_* codes that SSLCertVerificationError.verify_code carries.
_HOSTNAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
_EXPIRED = {10, 9}  # CERT_HAS_EXPIRED, CERT_NOT_YET_VALID
_UNKNOWN_ISSUER = {2, 18, 19, 20, 21}  # issuer unknown, self-signed leaf or chain, first cert unverifiable
# TLS alerts the daemon sends when it refuses our client certificate.
_CLIENT_CERT_ALERTS = (
    "ALERT_BAD_CERTIFICATE",
    "ALERT_UNKNOWN_CA",
    "ALERT_CERTIFICATE_REQUIRED",
    "ALERT_CERTIFICATE_EXPIRED",
    "ALERT_UNSUPPORTED_CERTIFICATE",
    "ALERT_CERTIFICATE_UNKNOWN",
    "ALERT_DECRYPT_ERROR",
)


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and everything it wraps (causes, contexts, exception arguments, urllib3 reasons)."""
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        linked = [current.__cause__, current.__context__, reason if isinstance(reason, BaseException) else None]
        linked += [argument for argument in current.args if isinstance(argument, BaseException)]
        pending += [item for item in linked if item is not None]


def is_timeout(error: BaseException) -> bool:
    """Whether the failure was running out of time (a hung engine, a stuck TLS handshake)."""
    return any(
        isinstance(cause, requests.exceptions.Timeout | TimeoutError | socket.timeout) for cause in causes(error)
    )


def describe(error: BaseException, host: str, cert_dir: str | None = None) -> str:
    """One sentence naming what failed and what to fix."""
    where = _address(host)
    for cause in causes(error):
        if isinstance(cause, TlsMaterialError | ApiVersionMismatch):
            return str(cause)
        if isinstance(cause, ssl.SSLCertVerificationError):
            return _verification(cause, where, cert_dir)
    for cause in causes(error):
        if isinstance(cause, ssl.SSLError):
            return _handshake(cause, where, cert_dir)
    if is_timeout(error):
        seconds = _timeout_seconds(error)
        handshake = any("handshake" in str(cause) for cause in causes(error))
        stage = "during the TLS handshake" if handshake else "waiting for an answer"
        return (
            f"timed out{seconds} {stage} with the Docker host at {where}: it accepted the connection but did not"
            " answer (a frozen dockerd, or something else listening on that port)"
        )
    for cause in causes(error):
        if isinstance(cause, ConnectionRefusedError):
            return (
                f"connection refused by {where}: no Docker daemon listens there (check DOCKER_HOST, the daemon's"
                " -H/hosts setting and the firewall)"
            )
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve the Docker host's name {urlparse(_url(host)).hostname!r}: {cause.strerror}"
    for cause in causes(error):
        if isinstance(cause, APIError):
            return describe_api_error(cause)
    if isinstance(error, requests.exceptions.ConnectionError):
        return f"the Docker host at {where} cannot be reached: {_innermost(error)}"
    if isinstance(error, DockerException):
        return f"the Docker client failed: {error}"
    return f"{type(error).__name__}: {error}"


def describe_api_error(error: APIError) -> str:
    """An answer the engine gave with an error status, naming an API version refusal as one."""
    explanation = str(error.explanation or error)
    if is_version_refusal(error):
        return (
            f"API version refused by the engine: {explanation}. Leave DOCKER_API_VERSION empty to negotiate, or set it"
            " within the engine's range (docker version shows it)"
        )
    return f"the Docker engine answered {error.status_code}: {explanation}"


def is_version_refusal(error: APIError) -> bool:
    """Whether the engine refused the API version we spoke (400 "client version X is too old/new")."""
    text = str(error.explanation or "").lower()
    return error.status_code == 400 and "client version" in text and ("too old" in text or "too new" in text)


def _verification(error: ssl.SSLCertVerificationError, where: str, cert_dir: str | None) -> str:
    code, why = error.verify_code, error.verify_message
    ca = f"{cert_dir}/ca.pem" if cert_dir else "ca.pem"
    if code in _HOSTNAME_MISMATCH:
        return (
            f"host name mismatch: the Docker host's certificate does not name {urlparse(_url(where)).hostname}"
            f" ({why}). Reissue server-cert.pem with subjectAltName listing it (DNS:<name>,IP:<address>), or set"
            " DOCKER_HOST to a name the certificate lists"
        )
    if code in _EXPIRED:
        return (
            f"TLS verification of the Docker host's certificate failed: {why} (server-cert.pem on the daemon, or"
            f" the CA in {ca}); renew it (scripts/docker-host-certs reissues the server and client certificates)"
        )
    if code in _UNKNOWN_ISSUER:
        return (
            f"TLS verification of the Docker host's certificate failed: {why}: the daemon at {where} presents a"
            f" certificate not signed by {ca}. Use the ca.pem that signed the daemon's server-cert.pem"
        )
    return f"TLS verification of the Docker host's certificate failed: {why} (OpenSSL error {code}; trusting {ca})"


def _handshake(error: ssl.SSLError, where: str, cert_dir: str | None) -> str:
    reason = str(error.reason or error)
    if any(alert in reason for alert in _CLIENT_CERT_ALERTS):
        cert = f"{cert_dir}/cert.pem" if cert_dir else "cert.pem"
        return (
            f"the Docker host at {where} refused our client certificate ({reason}): {cert} must be signed by the CA"
            " the daemon trusts (its --tlscacert), be unexpired, and carry extendedKeyUsage=clientAuth"
        )
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER_FAILURE" in reason:
        return f"{where} does not speak TLS (a plain-HTTP daemon, or another service on that port): {reason}"
    return f"the TLS handshake with the Docker host at {where} failed: {reason}"


def _timeout_seconds(error: BaseException) -> str:
    for cause in causes(error):
        for argument in cause.args:
            text = str(argument)
            if "timeout=" in text:
                try:
                    return f" after {float(text.rsplit('timeout=', 1)[1].rstrip(')')):.1f} s"
                except ValueError:
                    return ""
    return ""


def _innermost(error: BaseException) -> str:
    last = error
    for cause in causes(error):
        last = cause
    return f"{type(last).__name__}: {last}"


def _url(host: str) -> str:
    return host if "://" in host else f"tcp://{host}"


def _address(host: str) -> str:
    parsed = urlparse(_url(host))
    if parsed.scheme == "unix":
        return host
    return f"{parsed.hostname}:{parsed.port}" if parsed.port else str(parsed.hostname)
