"""What the SAM tests need: the pinned SAM CLI (.venv-sam), and for `sam local` root, dockerd,
debootstrap and the runtime's Python. A missing one fails the run in CI (CI=true), skips it elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAM = REPO / "scripts" / "sam"
SAM_PYTHON = REPO / ".venv-sam" / "bin" / "python"
SAM_CLI_VERSION = "1.170.0"
SYSTEM_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def require(condition: bool, message: str) -> None:
    """Go on when `condition` holds; otherwise fail in CI and skip elsewhere."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def require_sam_cli() -> None:
    """.venv-sam with the SAM CLI version scripts/sam is written for."""
    require(SAM_PYTHON.exists(), f"{SAM_PYTHON} is missing: run `make validate` (it installs the SAM CLI)")
    pattern = f"lib/python3*/site-packages/aws_sam_cli-{SAM_CLI_VERSION}.dist-info"
    message = f".venv-sam does not hold aws-sam-cli {SAM_CLI_VERSION}: run `make validate`"
    require(any((REPO / ".venv-sam").glob(pattern)), message)


def runtime_python_dir() -> Path | None:
    """The directory of a working python3.13 (the template's runtime), which `sam build` needs on PATH.

    A pyenv shim for a version that is not active only prints an error, so each candidate must run.
    """
    candidates = [shutil.which("python3.13"), *sorted(Path("/root/.pyenv/versions").glob("3.13*/bin/python3.13"))]
    candidates += sorted(Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))
    for candidate in candidates:
        if candidate and _runs(Path(candidate)):
            return Path(candidate).parent
    return None


def _runs(python: Path) -> bool:
    try:
        check = "import sys; assert sys.version_info[:2] == (3, 13)"
        return subprocess.run([str(python), "-c", check], capture_output=True, timeout=30, check=False).returncode == 0
    except OSError:
        return False


def require_sam_local() -> None:
    """Everything `sam local` through the local parts needs on this machine."""
    require_sam_cli()
    require(
        bool(shutil.which("dockerd", path=SYSTEM_PATH)) and os.geteuid() == 0,
        "dockerd is not installed (apt-get install docker.io) or not running as root",
    )
    require(bool(shutil.which("docker", path=SYSTEM_PATH)), "the docker CLI is missing (apt-get install docker.io)")
    require(
        bool(shutil.which("debootstrap", path=SYSTEM_PATH)),
        "debootstrap is missing (apt-get install debootstrap): it builds the Lambda base image stand-in",
    )
    require(runtime_python_dir() is not None, "python3.13 (the Lambda runtime's Python) is not installed")
