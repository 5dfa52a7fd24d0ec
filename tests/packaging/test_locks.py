"""One lock for everything that ships and is tested: every install comes from a hashed lock that agrees
with the top-level pins, and the layer, the venv and the SDK floor run agree with one another."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys

import pytest

from tests.support.locks import LOCK_TOOL, LOCKS, REPO, canonical, pins_with_includes, read_lock, top_level_pins

LAYER_LOCK = "layers/scheduler/requirements.lock"
DEV_LOCK = "requirements.lock"
FLOOR_LOCK = "requirements-botocore-floor.lock"
SDK = {"boto3", "botocore", "s3transfer"}  # what the floor run takes from the Lambda runtime instead
# Every file that installs Python packages; each must install a lock with --require-hashes.
INSTALLERS = ["Makefile", "layers/scheduler/build_layer.py", "scripts/build-lambda-base-image", ".ci/run"]


@pytest.mark.parametrize("top_level", sorted(LOCKS))
def test_every_top_level_pin_is_the_version_its_lock_installs(top_level: str) -> None:
    lock = read_lock(LOCKS[top_level])
    disagreements = {
        name: (version, lock[name].version if name in lock else "missing")
        for name, version in pins_with_includes(top_level).items()
        if name not in lock or lock[name].version != version
    }
    assert not disagreements, f"{top_level} vs {LOCKS[top_level]} (pin, lock): {disagreements}; run `make lock`"


@pytest.mark.parametrize("lock_file", sorted([*LOCKS.values(), LOCK_TOOL]))
def test_every_locked_package_is_pinned_with_its_hashes(lock_file: str) -> None:
    lock = read_lock(lock_file)
    text = (REPO / lock_file).read_text()
    requirement_lines = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]

    assert lock
    assert len(requirement_lines) == len(lock), "every requirement line is a `name==version` pin"
    assert not [name for name, entry in lock.items() if not entry.hashes], "pins without a hash"
    assert "--index-url" not in text and "--extra-index-url" not in text and "--find-links" not in text


@pytest.mark.parametrize("top_level", sorted(LOCKS))
def test_nothing_is_locked_that_no_requirement_asks_for(top_level: str) -> None:
    """A pin dropped from a top-level file must leave the lock too (`make lock`)."""
    lock = read_lock(LOCKS[top_level])
    orphans = []
    for name, entry in lock.items():
        reasons = [reason for reason in entry.via if not reason.startswith(("-c ", "--override "))]
        asked = False
        for reason in reasons:
            if reason.startswith("-r "):
                asked |= name in top_level_pins(reason.removeprefix("-r ").strip())
            else:
                asked |= canonical(reason.split()[0]) in lock
        if not asked:
            orphans.append(name)
    assert not orphans, f"{LOCKS[top_level]} holds packages nothing requires: {orphans}; run `make lock`"


def test_the_layer_ships_the_versions_the_dev_venv_tests() -> None:
    dev = read_lock(DEV_LOCK)
    differ = {
        name: (entry.version, dev[name].version if name in dev else "missing")
        for name, entry in read_lock(LAYER_LOCK).items()
        if name not in dev or dev[name].version != entry.version
    }
    assert not differ, f"layer vs dev lock: {differ}"


def test_the_floor_run_is_the_layer_as_locked_with_the_floor_sdk() -> None:
    floor, layer, dev = read_lock(FLOOR_LOCK), read_lock(LAYER_LOCK), read_lock(DEV_LOCK)
    pins = top_level_pins("requirements-botocore-floor.txt")

    assert {name: floor[name].version for name in layer} == {name: entry.version for name, entry in layer.items()}
    assert floor["boto3"].version == pins["boto3"]
    assert floor["botocore"].version == pins["botocore"]
    differ = {
        name: (entry.version, dev[name].version)
        for name, entry in floor.items()
        if name not in SDK and name in dev and dev[name].version != entry.version
    }
    assert not differ, f"the floor run's other packages must be the dev venv's: {differ}"


def test_the_venv_the_tests_run_in_is_the_dev_lock() -> None:
    if sys.prefix != str(REPO / ".venv"):
        message = f"not running in the project's .venv ({sys.prefix})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    installed = {canonical(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}
    locked = {name: entry.version for name, entry in read_lock(DEV_LOCK).items()}

    assert installed == locked


@pytest.mark.parametrize("installer", INSTALLERS)
def test_every_install_is_a_lock_with_require_hashes(installer: str) -> None:
    text = (REPO / installer).read_text()
    installs = [
        line
        for line in text.splitlines()
        if not line.lstrip().startswith("#") and re.search(r"pip['\",]*\s+['\"]?install|PIP_LOCKED|\"install\"", line)
    ]
    if installer == ".ci/run":
        assert not installs, ".ci/run installs through `make test` only"
        return
    assert installs
    assert "--require-hashes" in text
    for line in installs:
        if installer == "Makefile" and "pip install" not in line:
            assert "$(PIP_LOCKED)" in line and re.search(r"-r \S+\.lock|-r requirements-lock-tool\.txt", line), line
    if installer == "Makefile":
        (definition,) = [line for line in installs if "pip install" in line]
        assert definition.startswith("PIP_LOCKED :=") and "--require-hashes" in definition
