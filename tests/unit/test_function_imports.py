"""What each function imports at init, in a fresh process as Lambda starts one: no function loads
pydantic (inputs are validated by hand, `scheduler.inputs`), and the read and background functions load
no provider SDK either (their cold start stays near boto3's own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVIRONMENT = {
    "PATH": os.environ.get("PATH", ""),
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "LEASES_TABLE": "leases",
    "INTERNAL_SECRET": "test",
    "PROVIDERS": "local-docker,runpod,modal",
    "DOCKER_HOST": "tcp://127.0.0.1:9",
    "RUNPOD_API_KEY": "test",
    "MODAL_TOKEN_ID": "ak-test",
    "MODAL_TOKEN_SECRET": "as-test",
}
# Modal's client and what it alone brings (gRPC, protobuf, synchronicity).
MODAL_SDK = ("modal", "modal_proto", "grpclib", "google", "synchronicity")
PROVIDER_SDKS = ("docker", "requests", *MODAL_SDK)
PYDANTIC = ("pydantic", "pydantic_core")
FUNCTIONS = sorted(path.name for path in (REPO / "functions").iterdir() if (path / "app.py").is_file())
LIGHT_FUNCTIONS = (
    "get_lease",
    "list_leases",
    "release_lease",
    "renew_lease",
    "sweep_expired",
    "ttl_stream",
    "reconcile_workers",
    "lifecycle_events",
    "deliver_webhooks",
    "lease_events",
    "create_webhook",
    "list_webhooks",
    "delete_webhook",
)


def packages_imported_by(function: str, **environment: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after importing the function's handler module."""
    program = (
        "import json, sys; "
        f"sys.path[:0] = [{str(REPO / 'functions' / function)!r}, {str(REPO / 'layers' / 'scheduler')!r}]; "
        "import app; print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={**ENVIRONMENT, **environment},
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("function", LIGHT_FUNCTIONS)
def test_a_read_or_background_function_imports_no_provider_sdk(function: str) -> None:
    assert packages_imported_by(function) & set(PROVIDER_SDKS) == set()


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_function_imports_pydantic(function: str) -> None:
    assert packages_imported_by(function) & set(PYDANTIC) == set()


def test_the_acquire_function_loads_the_docker_sdk_at_init() -> None:
    assert "docker" in packages_imported_by("acquire_lease")


def test_the_acquire_function_loads_modal_at_init_when_providers_names_it() -> None:
    assert "modal" in packages_imported_by("acquire_lease")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_without_modal_in_providers_no_function_imports_it(function: str) -> None:
    assert packages_imported_by(function, PROVIDERS="local-docker,runpod") & set(MODAL_SDK) == set()
