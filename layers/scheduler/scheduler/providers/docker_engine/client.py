"""docker-py's API client, set up the way the docker CLI would be for the same DOCKER_* variables.

- TLS through `tls.client_context` (the host's own CA, host name checked, client certificate),
  mounted as the session's https adapter so requests' CA bundle variables and defaults never apply.
- The API version negotiated from the engine's unversioned `/version` once per process and host,
  or pinned by DOCKER_API_VERSION.
- Every request bounded by the caller's Deadline (connect, TLS handshake and each read).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from threading import Lock, local
from typing import Any

import docker
import docker.constants
import requests
from docker.errors import APIError
from requests.adapters import HTTPAdapter

from scheduler.deadline import Deadline
from scheduler.observability.log import Logger
from scheduler.providers.docker_engine import api_versions
from scheduler.providers.docker_engine.failures import describe, is_timeout, is_version_refusal
from scheduler.providers.docker_engine.tls import TlsFiles, client_context

logger = Logger(child=True)

DEFAULT_HOST = "unix:///var/run/docker.sock"
DEFAULT_CALL_TIMEOUT_SECONDS = 20.0
# Connections kept per host: as many as the sweep's threads may use at once (SWEEP_CONCURRENCY ≤ 64).
POOL_SIZE = 64
# The newest API version docker-py is written for (docker 7.2: 1.45); the driver speaks no newer one.
NEWEST_SUPPORTED = str(docker.constants.DEFAULT_DOCKER_API_VERSION)
OLDEST_SUPPORTED = api_versions.OLDEST_SUPPORTED

# Per execution environment: the version negotiated with each host, so a cold start pays one
# /version request and every later client (and call) pays none.
_negotiated: dict[str, str] = {}
_negotiated_lock = Lock()


class BudgetExhausted(requests.exceptions.Timeout):
    """The caller's deadline passed before this request could be sent."""


class _TlsAdapter(HTTPAdapter):
    """An https adapter whose SSLContext alone decides trust: requests' `verify` and `cert` never apply."""

    def __init__(self, context: ssl.SSLContext, **kwargs: Any) -> None:
        self._context = context
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[Any, Any]:
        host_params, _ = super().build_connection_pool_key_attributes(request, True, None)
        return host_params, {"ssl_context": self._context, "cert_reqs": "CERT_REQUIRED"}

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # requests would point the pool at its CA bundle (verify=True) or switch checks off
        # (verify=False); the context already holds the host's CA and our client certificate.
        conn.cert_reqs = "CERT_REQUIRED"
        conn.ca_certs = None
        conn.ca_cert_dir = None


class EngineClient(docker.APIClient):
    """An Engine API client whose requests each end by the deadline set with `within`."""

    def __init__(
        self,
        base_url: str,
        *,
        version: str,
        timeout: float,
        tls_context: ssl.SSLContext | None,
        version_pinned: bool,
        cert_dir: str | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url,
            version=version,
            timeout=timeout,
            tls=tls_context is not None,
            max_pool_size=POOL_SIZE,
        )
        # requests would let REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE and proxy variables steer this session.
        self.trust_env = False
        if tls_context is not None:
            adapter = _TlsAdapter(tls_context, pool_maxsize=POOL_SIZE)
            self.mount("https://", adapter)
            self._custom_adapter = adapter
            self.verify = True
            self.cert = None
        self.host = base_url
        self.cert_dir = cert_dir
        self.version_pinned = version_pinned
        self.version_settled = version_pinned
        self._bound = local()

    @contextmanager
    def within(self, deadline: Deadline) -> Iterator[EngineClient]:
        """Run the calls made inside the block (on this thread) under `deadline`."""
        previous = getattr(self._bound, "deadline", None)
        self._bound.deadline = deadline
        try:
            yield self
        finally:
            self._bound.deadline = previous

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        bound = getattr(self, "_bound", None)  # None while docker-py's own constructor runs
        deadline: Deadline | None = getattr(bound, "deadline", None)
        if deadline is not None:
            remaining = deadline.remaining()
            if remaining <= 0.05:
                raise BudgetExhausted(f"no time left for {request.method} {request.path_url}", request=request)
            kwargs["timeout"] = _bounded(kwargs.get("timeout"), remaining)
        return super().send(request, **kwargs)

    def settle_version(self, version: str) -> None:
        """Speak `version` from now on (the one negotiated for this host)."""
        self._version = version  # docker-py keeps it here; its "auto" mode sets it the same way
        self.version_settled = True


def connect(
    environment: Mapping[str, str],
    *,
    api_version: str | None = None,
    timeout: float = DEFAULT_CALL_TIMEOUT_SECONDS,
) -> EngineClient:
    """A client for DOCKER_HOST (no network traffic yet); the version is pinned or settled by `negotiate`.

    TLS is on when DOCKER_CERT_PATH or DOCKER_TLS_VERIFY is set, and then always verifies the
    host: the CLI's "a cert path without DOCKER_TLS_VERIFY skips verification" would hand lease
    env to any impostor.
    """
    host = environment.get("DOCKER_HOST") or DEFAULT_HOST
    cert_path = environment.get("DOCKER_CERT_PATH")
    context = None
    cert_dir = None
    if cert_path or environment.get("DOCKER_TLS_VERIFY"):
        cert_dir = str(Path(cert_path or Path.home() / ".docker"))
        context = client_context(TlsFiles.in_directory(Path(cert_dir)))
    pinned = (api_version or "").strip()
    with _negotiated_lock:
        known = _negotiated.get(host)
    client = EngineClient(
        host,
        version=pinned or known or OLDEST_SUPPORTED,
        timeout=timeout,
        tls_context=context,
        version_pinned=bool(pinned),
        cert_dir=cert_dir,
    )
    if known and not pinned:
        client.settle_version(known)
    return client


def negotiate(client: EngineClient) -> str:
    """Settle the client's API version with one unversioned GET /version (cached per host)."""
    if client.version_settled:
        return str(client.api_version)
    with _negotiated_lock:
        known = _negotiated.get(client.host)
    if known is None:
        known = api_versions.choose(client.version(api_version=False), NEWEST_SUPPORTED)
        with _negotiated_lock:
            _negotiated[client.host] = known
    client.settle_version(known)
    return known


def forget_negotiated(host: str | None = None) -> None:
    """Drop the cached version for `host` (all hosts when None), e.g. after the engine refused it."""
    with _negotiated_lock:
        if host is None:
            _negotiated.clear()
        else:
            _negotiated.pop(host, None)


def call_failed(client: EngineClient, error: BaseException) -> str:
    """What went wrong calling the client's host, in words an operator can act on; logged as a warning too."""
    description = describe(error, client.host, client.cert_dir)
    logger.warning(
        "Docker host call failed",
        extra={"host": client.host, "problem": description, "timeout": is_timeout(error)},
    )
    return description


def renegotiate_if_refused(client: EngineClient, error: APIError) -> None:
    """After the engine refused the API version spoken: negotiate again on the next call.

    The engine was replaced by one with another API range (e.g. upgraded to Engine 29 while this
    environment stayed warm)."""
    if is_version_refusal(error) and client.version_settled and not client.version_pinned:
        forget_negotiated(client.host)
        client.version_settled = False


def _bounded(timeout: Any, remaining: float) -> Any:
    if timeout is None:
        return remaining
    if isinstance(timeout, tuple):
        return tuple(remaining if part is None else min(float(part), remaining) for part in timeout)
    return min(float(timeout), remaining)
