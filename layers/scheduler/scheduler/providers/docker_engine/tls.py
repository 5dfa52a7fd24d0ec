"""The client side of a Docker host's mutual TLS, verified as the docker CLI verifies it.

The host is verified against its own CA (`ca.pem`) and must be named by its certificate's
subjectAltName; the client presents `cert.pem`/`key.pem`. Python 3.13 adds `VERIFY_X509_STRICT`
to its default context, which refuses CAs the docker CLI (Go's crypto/x509) accepts — notably the
CA of Docker's own guide, made with `openssl req -new -x509`, which has no `keyUsage` extension.
Only that flag is cleared; everything else stays as strict as Python's default, and a certificate
that names its host only in the common name is refused, as Go refuses it.

No `cryptography` here (the layer does not ship it): the keyUsage check reads the DER directly.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from pathlib import Path
from threading import Lock
from typing import NamedTuple

from scheduler.observability.log import Logger

logger = Logger(child=True)

REGENERATE_HINT = "scripts/docker-host-certs makes a CA with keyUsage=critical,keyCertSign,cRLSign"
_KEY_USAGE_OID = bytes.fromhex("551d0f")  # 2.5.29.15, DER-encoded
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)
_warned: set[str] = set()
_warned_lock = Lock()


class TlsMaterialError(Exception):
    """The TLS files are missing or unusable; the message says which and how to fix it."""


class TlsFiles(NamedTuple):
    """The three files a Docker client needs, as DOCKER_CERT_PATH names them."""

    directory: Path
    ca: Path
    cert: Path
    key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> TlsFiles:
        """`ca.pem`, `cert.pem` and `key.pem` inside `directory`."""
        return cls(directory, directory / "ca.pem", directory / "cert.pem", directory / "key.pem")

    def missing(self) -> list[str]:
        """The names of the files that are not there."""
        return [path.name for path in (self.ca, self.cert, self.key) if not path.is_file()]


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """An SSLContext trusting only `ca.pem`, checking the host name, and presenting `cert.pem`."""
    missing = files.missing()
    if missing:
        raise TlsMaterialError(
            f"the Docker TLS directory {files.directory} lacks {', '.join(missing)}"
            " (DOCKER_CERT_PATH must hold ca.pem, cert.pem and key.pem, as the docker CLI expects)"
        )
    try:
        # With a cafile the context trusts that CA alone, never the system store.
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files.ca))
    except (ssl.SSLError, ValueError) as error:
        raise TlsMaterialError(f"{files.ca} holds no usable PEM certificate: {error}") from error
    except OSError as error:
        raise TlsMaterialError(f"{files.ca} cannot be read: {error.strerror or error}") from error
    # What Python 3.13 checks beyond OpenSSL's defaults, and beyond what the docker CLI checks.
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    # Go (the docker CLI) ignores the common name: only subjectAltName entries name the host.
    context.hostname_checks_common_name = False
    try:
        # A passphrase-protected key must fail here, never wait for OpenSSL's prompt on a terminal.
        context.load_cert_chain(str(files.cert), str(files.key), password=_refuse_passphrase(files.key))
    except ssl.SSLError as error:
        raise TlsMaterialError(
            f"{files.cert} and {files.key} are not a matching certificate and key: {error.reason or error}"
        ) from error
    except OSError as error:
        raise TlsMaterialError(f"{files.cert} or {files.key} cannot be read: {error.strerror or error}") from error
    warn_once_if_ca_lacks_key_usage(files.ca)
    return context


def _refuse_passphrase(key: Path) -> Callable[[], bytes]:
    def refuse() -> bytes:
        raise TlsMaterialError(
            f"{key} is protected by a passphrase; the service needs it unencrypted"
            f" (openssl pkey -in {key.name} -out {key.name}.plain, then replace it; keep it mode 0600)"
        )

    return refuse


def certificates_without_key_usage(pem: str) -> list[int]:
    """1-based positions of the certificates in a PEM bundle that carry no keyUsage extension."""
    lacking = []
    for position, block in enumerate(_PEM_CERTIFICATE.findall(pem), start=1):
        try:
            if not has_key_usage(ssl.PEM_cert_to_DER_cert(block)):
                lacking.append(position)
        except ValueError:
            continue  # not a certificate we can read; OpenSSL will say so when it loads it
    return lacking


def has_key_usage(der: bytes) -> bool:
    """Whether the DER certificate's extensions include keyUsage (2.5.29.15); ValueError if malformed."""
    _, certificate, certificate_end = _header(der, 0)
    _, tbs, tbs_end = _header(der, certificate)
    for tag, start, _end in _children(der, tbs, tbs_end):
        if tag == 0xA3:  # [3] EXPLICIT Extensions (v3 only)
            _, extensions, extensions_end = _header(der, start)
            for _, extension, extension_end in _children(der, extensions, extensions_end):
                oid_tag, oid, oid_end = _header(der, extension)
                if oid_end > extension_end:
                    raise ValueError("extension overruns its sequence")
                if oid_tag == 0x06 and der[oid:oid_end] == _KEY_USAGE_OID:
                    return True
    if certificate_end > len(der):
        raise ValueError("certificate overruns its data")
    return False


def warn_once_if_ca_lacks_key_usage(ca: Path) -> None:
    """Log once per process, at warning level, that the CA lacks keyUsage and how to regenerate it."""
    try:
        lacking = certificates_without_key_usage(ca.read_text())
    except (OSError, UnicodeDecodeError):
        return
    key = str(ca.resolve())
    with _warned_lock:
        if not lacking or key in _warned:
            return
        _warned.add(key)
    logger.warning(
        f"the Docker host's CA ({ca.name}) has no keyUsage extension, as Docker's TLS guide makes it with"
        " `openssl req -new -x509`; it is accepted, as the docker CLI accepts it, but strict TLS clients"
        f" (Python 3.13's default) refuse such a CA. Regenerate the certificates: {REGENERATE_HINT}",
        extra={"ca": str(ca), "certificates_without_key_usage": lacking},
    )


def _header(der: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at `offset`."""
    if offset + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[offset], der[offset + 1]
    offset += 2
    if length & 0x80:
        size = length & 0x7F
        if size == 0 or size > 4 or offset + size > len(der):
            raise ValueError("unsupported DER length")
        length = int.from_bytes(der[offset : offset + size], "big")
        offset += size
    return tag, offset, offset + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    found = []
    while start < end:
        tag, contents, contents_end = _header(der, start)
        if contents_end > end:
            raise ValueError("element overruns its parent")
        found.append((tag, contents, contents_end))
        start = contents_end
    return found
