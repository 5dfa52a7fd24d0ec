"""Build the shared layer into <target>: the locked dependencies for both Lambda architectures, and the domain.

    python3.13 build_layer.py "$ARTIFACTS_DIR/python"     # what the Makefile (so `sam build`) runs

The layer serves x86_64 and arm64 functions alike (template parameter Architecture), because which one
a stack runs is chosen at deploy time, after `sam build` made the layer: the lock is installed twice
with --require-hashes, from the manylinux wheels of each platform, and the two trees are merged. They
must agree file for file (but for the wheels' own metadata) except in what only one platform has: its
compiled extension modules (`*.cpython-313-x86_64-linux-gnu.so` beside `*.cpython-313-aarch64-linux-gnu.so`,
of which CPython imports the one for the machine it runs on). Everything is byte-compiled, since /opt is
read-only in Lambda and every cold start would compile the sources again.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "requirements.lock"
PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
PYTHON_VERSION = "3.13"


def install(platform: str, target: Path) -> None:
    """The lock's wheels for one platform into `target`, each checked against its hash."""
    subprocess.run(  # noqa: S603 - fixed argv: this interpreter's pip and the lock beside this file  # nosec B603
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--root-user-action=ignore",
            "--no-compile",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
            "--implementation=cp",
            f"--python-version={PYTHON_VERSION}",
            f"--platform={platform}",
            f"--target={target}",
            f"--requirement={LOCK}",
        ],
        check=True,
    )


def merge(primary: Path, other: Path) -> list[Path]:
    """Copy into `primary` what only `other` has; refuse a file both have with different content."""
    added: list[Path] = []
    conflicts: list[str] = []
    for source in sorted(other.rglob("*")):
        if source.is_dir():
            continue
        relative = source.relative_to(other)
        destination = primary / relative
        if not destination.exists():
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
            added.append(relative)
        elif not filecmp.cmp(source, destination, shallow=False):
            if relative.parts[0].endswith(".dist-info"):
                continue  # the wheel's own bookkeeping (WHEEL tags, RECORD, SBOM): the x86_64 copy is kept
            conflicts.append(str(relative))
    if conflicts:
        raise SystemExit(f"build_layer: the platforms' wheels disagree on {', '.join(conflicts)}")
    return added


def build(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="layer-arm64-") as scratch:
        install(PLATFORMS["x86_64"], target)
        install(PLATFORMS["arm64"], Path(scratch))
        added = merge(target, Path(scratch))
    print(f"build_layer: {len(added)} arm64-only files added: {', '.join(sorted({p.parts[0] for p in added}))}")
    shutil.copytree(HERE / "scheduler", target / "scheduler", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(  # noqa: S603 - fixed argv: this interpreter's compileall  # nosec B603
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(target)],
        check=True,
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    build(Path(sys.argv[1]))
