"""scripts/samcli_loopback.py, the part of scripts/sam that does not need SAM installed to check."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.sam.conftest import REPO, SAM_CLI_VERSION


def _shim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("samcli_loopback", REPO / "scripts" / "samcli_loopback.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_emulator_listens_on_loopback_ports_sam_chose() -> None:
    shim = _shim()
    entrypoint = ["/var/rapid/aws-lambda-rie", "--log-level", "error"]

    assert shim.emulator_entrypoint(entrypoint, 5123, 9150) == [
        "/var/rapid/aws-lambda-rie",
        "--runtime-interface-emulator-address",
        "127.0.0.1:5123",
        "--runtime-api-address",
        "127.0.0.1:9150",
        "--log-level",
        "error",
    ]


def test_other_entrypoints_are_left_alone() -> None:
    shim = _shim()

    assert shim.emulator_entrypoint(["/bin/sh", "-c", "true"], 5123, 9150) == ["/bin/sh", "-c", "true"]
    assert shim.emulator_entrypoint([], 5123, 9150) == []


def test_it_is_pinned_to_the_sam_cli_in_requirements_sam() -> None:
    pinned = (REPO / "requirements-sam.txt").read_text()

    assert _shim().SAM_CLI_VERSION == SAM_CLI_VERSION
    assert f"aws-sam-cli=={SAM_CLI_VERSION}" in pinned
