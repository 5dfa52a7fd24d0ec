"""dynalite — an independent DynamoDB implementation (npm `dynalite` 4, Apache-2.0) — served in memory on loopback.

moto is lenient where DynamoDB is strict (start keys outside the key condition, number range,
reserved words); dynalite enforces DynamoDB's validation, so the store runs against both. dynalite has
no transactions, no streams and no TTL: tests that need them run on moto only and say so.
`make` installs it (`npm ci` in tests/dynalite); CI installs Debian's nodejs and npm first. dynalite 4
declares Node >= 20, but its dependencies need only 18 and the suite passes on Debian bookworm's Node 18.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from devstack.dynamodb import FAKE_CREDENTIALS

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "dynalite"
SERVE = PACKAGE_DIR / "serve.js"
INSTALLED = PACKAGE_DIR / "node_modules" / "dynalite" / "package.json"
WHAT_DYNALITE_LACKS = "dynalite has no TransactWriteItems, streams or TTL (DynamoDB has all three)"


class DynaliteMissing(RuntimeError):
    """node or the dynalite package is not installed."""


def missing_reason() -> str | None:
    """Why dynalite cannot start here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm; CI's .ci/run does)"
    if not INSTALLED.exists():
        return "dynalite is not installed: run `make` (npm ci in tests/dynalite)"
    return None


@dataclass
class Dynalite:
    """A dynalite process on a free loopback port; it exits when its standard input closes."""

    process: subprocess.Popen[str]
    endpoint_url: str

    @classmethod
    def start(cls, timeout: float = 30.0) -> Dynalite:
        """Start dynalite in memory; DynaliteMissing when node or the package is absent."""
        reason = missing_reason()
        if reason:
            raise DynaliteMissing(reason)
        process = subprocess.Popen(
            ["node", str(SERVE)],
            cwd=PACKAGE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "DYNALITE_HOST": "127.0.0.1", "DYNALITE_PORT": "0"},
        )
        assert process.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not line or "listening on " not in line[0]:
            process.kill()
            raise DynaliteMissing(f"dynalite did not start: {line[0] if line else 'no output'}")
        return cls(process, line[0].strip().rsplit(" ", 1)[-1])

    def client(self, service: str = "dynamodb") -> Any:
        """A boto3 DynamoDB client on this server."""
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.endpoint_url,
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def stop(self) -> None:
        """Close its standard input (it exits) and reap it."""
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
