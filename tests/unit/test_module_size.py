"""Small modules: no module of the product (the layer and the functions), the client or the local stack
(`make run`) is longer than 450 lines. A module that grows past it is split along a seam of its own."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = ("layers", "functions", "devstack", "client/src")
MAX_LINES = 450
# Written by a program, read by none: its length follows openapi.yaml's rules (`make contract`), not a seam.
GENERATED = frozenset({"layers/scheduler/scheduler/wire.py"})


def lines_of(path: Path) -> int:
    """As `wc -l` counts them."""
    return path.read_bytes().count(b"\n")


def modules_too_long(repo: Path = REPO, limit: int = MAX_LINES) -> list[str]:
    """`path: N lines` for every module past `limit`, longest first."""
    lengths = {
        path: lines_of(path)
        for tree in TREES
        for path in (repo / tree).rglob("*.py")
        if str(path.relative_to(repo)) not in GENERATED
    }
    long = sorted((path for path, lines in lengths.items() if lines > limit), key=lambda path: -lengths[path])
    return [f"{path.relative_to(repo)}: {lengths[path]} lines" for path in long]


def test_no_module_is_longer_than_450_lines() -> None:
    too_long = modules_too_long()
    assert not too_long, f"modules past {MAX_LINES} lines (split each along a seam):\n  " + "\n  ".join(too_long)


def test_a_module_past_the_limit_is_named_with_its_length(tmp_path: Path) -> None:
    (tmp_path / "devstack").mkdir()
    (tmp_path / "devstack" / "short.py").write_text("x = 1\n" * 450)
    (tmp_path / "devstack" / "long.py").write_text("x = 1\n" * 451)
    assert modules_too_long(tmp_path) == ["devstack/long.py: 451 lines"]
