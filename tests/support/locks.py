"""The project's requirements files and their locks (`make lock`), read the way pip reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Each top-level file and the lock `make lock` resolves it into (scripts/lock).
LOCKS = {
    "requirements-dev.txt": "requirements.lock",
    "layers/scheduler/requirements.txt": "layers/scheduler/requirements.lock",
    "requirements-botocore-floor.txt": "requirements-botocore-floor.lock",
    "requirements-sam.txt": "requirements-sam.lock",
    "requirements-checkov.txt": "requirements-checkov.lock",
    "scripts/lambda-base-image.requirements.txt": "scripts/lambda-base-image.requirements.lock",
}
LOCK_TOOL = "requirements-lock-tool.txt"  # uv itself: a one-package file that is its own lock


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Locked:
    """One entry of a lock: the pin, its hashes, and what asked for it (uv's `# via` lines)."""

    name: str
    version: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def read_lock(relative: str) -> dict[str, Locked]:
    """The lock's entries by canonical name."""
    entries: dict[str, Locked] = {}
    current: Locked | None = None
    in_via = False
    for raw in (REPO / relative).read_text().splitlines():
        line = raw.strip()
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", raw)
        if pin:
            current = Locked(canonical(pin.group(1)), pin.group(3))
            entries[current.name] = current
            in_via = False
        elif current is not None and line.startswith("# via"):
            in_via = True
            rest = line.removeprefix("# via").strip()
            if rest:
                current.via.append(rest)
        elif current is not None and in_via and line.startswith("#   "):
            current.via.append(line.removeprefix("#").strip())
        if current is not None:
            current.hashes += re.findall(r"--hash=(sha256:[0-9a-f]{64})", raw)
    return entries


def top_level_pins(relative: str) -> dict[str, str]:
    """The `name==version` pins a requirements file states itself (its -r includes not followed)."""
    pins: dict[str, str] = {}
    for raw in (REPO / relative).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)$", line)
        if pin is None:
            raise AssertionError(f"{relative}: {line!r} is not pinned with ==")
        pins[canonical(pin.group(1))] = pin.group(3)
    return pins


def includes(relative: str) -> list[str]:
    """The files a requirements file pulls in with -r, relative to the repository."""
    found = []
    for raw in (REPO / relative).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            found.append(line.split(None, 1)[1])
    return found


def pins_with_includes(relative: str) -> dict[str, str]:
    """A requirements file's own pins and those of every file it includes."""
    pins = {}
    for included in includes(relative):
        pins |= pins_with_includes(included)
    return pins | top_level_pins(relative)
