"""The shared layer as `sam build` makes it ships exactly what the tests ran with, and nothing that can shadow
the Lambda runtime's or the ADOT layer's packages.

One `sam build SchedulerLayer` into a directory of its own (layers/scheduler/Makefile → build_layer.py),
then its *.dist-info read as pip would: the set of (name, version) must be the layer lock's, and each
version the one installed in the venv running these tests.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import time
from email.parser import Parser
from pathlib import Path

import pytest

from tests.sam.conftest import REPO, SAM, require_sam_cli, runtime_python_dir
from tests.support.locks import canonical, read_lock

pytestmark = pytest.mark.timeout(600)

ARCHITECTURES = {"x86_64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sam build SchedulerLayer` (no cache); the built layer's python/ directory."""
    require_sam_cli()
    python_dir = runtime_python_dir()
    if python_dir is None:
        message = "python3.13 (the Lambda runtime's Python, which `sam build` needs) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    build_dir = tmp_path_factory.mktemp("layer-build")
    environment = {**os.environ, "PATH": f"{python_dir}:{os.environ.get('PATH', '')}", "SAM_CLI_TELEMETRY": "0"}
    started = time.monotonic()
    result = subprocess.run(
        [str(SAM), "build", "SchedulerLayer", "--build-dir", str(build_dir), "--no-cached"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert result.returncode == 0, f"sam build SchedulerLayer failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    print(f"sam build SchedulerLayer in {time.monotonic() - started:.1f} s")
    return build_dir / "SchedulerLayer" / "python"


def _distributions(root: Path) -> dict[str, str]:
    """(canonical name → version) of every *.dist-info directly under `root`."""
    found = {}
    for metadata in sorted(root.glob("*.dist-info/METADATA")):
        headers = Parser().parsestr(metadata.read_text(encoding="utf-8"), headersonly=True)
        found[canonical(headers["Name"])] = headers["Version"]
    return found


def test_the_layer_holds_exactly_the_locked_packages(layer: Path) -> None:
    built = _distributions(layer)
    locked = {name: entry.version for name, entry in read_lock("layers/scheduler/requirements.lock").items()}
    diff = sorted(set(built.items()) ^ set(locked.items()))
    print(f"{len(built)} distributions in the built layer; differences from the lock: {diff or 'none'}")

    assert built == locked


def test_the_layer_holds_the_versions_the_tests_ran_with(layer: Path) -> None:
    differ = {
        name: (version, importlib.metadata.version(name))
        for name, version in _distributions(layer).items()
        if importlib.metadata.version(name) != version
    }
    assert not differ, f"(layer, venv): {differ}"


def test_no_opentelemetry_in_the_layer(layer: Path) -> None:
    """ADOT's OpenTelemetry merges with the layer in /opt/python; a copy here could shadow it."""
    assert not [name for name in _distributions(layer) if name.startswith("opentelemetry")]
    assert not list(layer.glob("opentelemetry*"))


def test_no_aws_sdk_in_the_layer(layer: Path) -> None:
    """The functions use the runtime's boto3 (tested at its floor by `make unit-botocore-floor`)."""
    assert not {"boto3", "botocore", "s3transfer"} & set(_distributions(layer))


def test_every_compiled_extension_is_there_for_both_architectures(layer: Path) -> None:
    by_architecture = {
        architecture: {str(path.relative_to(layer)).replace(suffix, "{arch}") for path in layer.rglob(f"*{suffix}.so")}
        for architecture, suffix in ARCHITECTURES.items()
    }
    assert by_architecture["x86_64"], "no compiled extension at all (charset-normalizer has some)"
    assert by_architecture["x86_64"] == by_architecture["arm64"]


def test_the_layer_is_byte_compiled_and_imports_on_its_own(layer: Path) -> None:
    sources = list(layer.rglob("*.py"))
    compiled = {path.parent.parent / path.name.split(".")[0] for path in layer.rglob("__pycache__/*.cpython-313.pyc")}
    assert sources
    assert not [source for source in sources if source.with_suffix("") not in compiled][:5]
    python_dir = runtime_python_dir()
    assert python_dir is not None
    code = (
        "import charset_normalizer.md, aws_lambda_powertools, docker, requests, scheduler.models, scheduler.config;"
        " import google._upb._message, watchfiles._rust_notify, scheduler.providers.modal.driver"  # stable-ABI ones
    )
    # -I -S: nothing but the standard library and the layer (no venv, no user site, no PYTHONPATH).
    subprocess.run(
        [str(python_dir / "python3.13"), "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(layer)!r}); {code}"],
        check=True,
        timeout=60,
    )
