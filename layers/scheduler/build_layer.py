"""Build the shared layer into <target>: the locked dependencies for both Lambda architectures, and the domain.

    python3.13 build_layer.py "$ARTIFACTS_DIR/python"     # what the Makefile (so `sam build`) runs

The layer serves x86_64 and arm64 functions alike (template parameter Architecture), because which one
a stack runs is chosen at deploy time, after `sam build` made the layer: the lock is installed twice
with --require-hashes, from the manylinux wheels of each platform, and the two trees are merged. They
must agree file for file (but for the wheels' own metadata) except in what only one platform has: its
compiled extension modules (`*.cpython-313-x86_64-linux-gnu.so` beside `*.cpython-313-aarch64-linux-gnu.so`,
of which CPython imports the one for the machine it runs on). An extension built for the stable ABI
(`*.abi3.so`: protobuf's upb, watchfiles) has one name on both platforms, so each platform's copy is renamed to
that platform's own suffix first: CPython looks for `<name>.cpython-313-<machine>-linux-gnu.so` before
`<name>.abi3.so`, and a stable-ABI module loads under either. Everything is byte-compiled, since /opt is
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
# The extension suffix CPython 3.13 tries first on each platform (importlib.machinery.EXTENSION_SUFFIXES[0]).
MACHINE_SUFFIXES = {"x86_64": ".cpython-313-x86_64-linux-gnu.so", "arm64": ".cpython-313-aarch64-linux-gnu.so"}


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


def name_stable_abi_extensions(tree: Path, architecture: str) -> None:
    """`x.abi3.so` → `x.cpython-313-<machine>-linux-gnu.so`, so both platforms' copies can sit side by side."""
    for extension in sorted(tree.rglob("*.abi3.so")):
        extension.rename(extension.with_name(extension.name.removesuffix(".abi3.so") + MACHINE_SUFFIXES[architecture]))


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
        name_stable_abi_extensions(target, "x86_64")
        name_stable_abi_extensions(Path(scratch), "arm64")
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
