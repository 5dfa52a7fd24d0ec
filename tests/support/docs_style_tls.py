"""TLS material made exactly as Docker's guide "Protect the Docker daemon access" makes it, with the openssl CLI.

The guide's CA comes from `openssl req -new -x509`, which (with the stock openssl.cnf) has no
`keyUsage` extension, and its server and client certificates from `openssl x509 -req -extfile`
with only the extensions the extfile names (no authority key identifier). Python 3.13's
VERIFY_X509_STRICT refuses that chain; the docker CLI accepts it.

One deliberate difference: the guide protects ca-key.pem with a passphrase (`genrsa -aes256`);
tests cannot type one, so the CA key is written unencrypted. Nothing else changes (RSA 4096,
SHA-256, 365 days, `-CAcreateserial`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

GUIDE_HOST = "localhost"
GUIDE_ADDRESSES = ("127.0.0.1",)


def _openssl(directory: Path, *arguments: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is missing (apt-get install openssl)")
    completed = subprocess.run([openssl, *arguments], cwd=directory, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(arguments)} failed: {completed.stderr.strip()}")


def make_docs_style_tls(
    directory: Path, host: str = GUIDE_HOST, addresses: tuple[str, ...] = GUIDE_ADDRESSES, bits: int = 4096
) -> Path:
    """Write ca.pem, ca-key.pem, server-cert.pem, server-key.pem, cert.pem, key.pem into `directory`."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    # CA (the guide: `openssl genrsa -aes256 -out ca-key.pem 4096`; here without the passphrase).
    _openssl(directory, "genrsa", "-out", "ca-key.pem", str(bits))
    # The guide answers openssl's prompts by hand; -subj gives the same answers non-interactively.
    _openssl(
        directory,
        "req", "-new", "-x509", "-days", "365", "-key", "ca-key.pem", "-sha256", "-out", "ca.pem",
        "-subj", f"/CN={host}",
    )  # fmt: skip
    # Server.
    _openssl(directory, "genrsa", "-out", "server-key.pem", str(bits))
    _openssl(
        directory, "req", "-subj", f"/CN={host}", "-sha256", "-new", "-key", "server-key.pem", "-out", "server.csr"
    )
    san = ",".join([f"DNS:{host}", *(f"IP:{address}" for address in addresses)])
    (directory / "extfile.cnf").write_text(f"subjectAltName = {san}\nextendedKeyUsage = serverAuth\n")
    _openssl(
        directory,
        "x509", "-req", "-days", "365", "-sha256", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-out", "server-cert.pem", "-extfile", "extfile.cnf",
    )  # fmt: skip
    # Client.
    _openssl(directory, "genrsa", "-out", "key.pem", str(bits))
    _openssl(directory, "req", "-subj", "/CN=client", "-new", "-key", "key.pem", "-out", "client.csr")
    (directory / "extfile-client.cnf").write_text("extendedKeyUsage = clientAuth\n")
    _openssl(
        directory,
        "x509", "-req", "-days", "365", "-sha256", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-out", "cert.pem", "-extfile", "extfile-client.cnf",
    )  # fmt: skip
    for leftover in ("client.csr", "server.csr", "extfile.cnf", "extfile-client.cnf"):
        (directory / leftover).unlink()
    for name in ("ca-key.pem", "key.pem", "server-key.pem"):
        (directory / name).chmod(0o400)
    for name in ("ca.pem", "server-cert.pem", "cert.pem"):
        (directory / name).chmod(0o444)
    return directory
