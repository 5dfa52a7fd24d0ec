"""README.md's layout map (section "Layout") names every module of the product, the client, devstack, bench and
scripts, and every test folder, exactly once, and nothing that does not exist.

The map is a tree: each entry a line `<tree prefix>├── <path>  <what it is>` (or `└── ` for a folder's last entry),
its path relative to the folder entry above it, four columns of prefix per level; a line with no `├──`/`└──`
continues the description above it. A package's `__init__.py` is its folder's entry.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
HEADING = "## Layout"
# Where every .py module must have its line (test modules are covered by their folder's).
MODULE_ROOTS = ("functions", "layers/scheduler", "client/src", "devstack", "bench", "scripts")
TESTS = "tests"
NOT_SOURCES = frozenset({"__pycache__", "node_modules", "build"})
_ENTRY = re.compile(r"^(?P<prefix>(?:[│ ]   )*)(?P<branch>[├└])── (?P<name>\S+)(?: {2,}(?P<what>.*))?$")


@dataclass
class Entry:
    """One line of the map naming a path: its depth, its place in the tree, the line as written."""

    path: str  # relative to the repository; a folder's ends with "/"
    depth: int
    last: bool  # `└──`: no entry of its folder follows
    line: str
    number: int  # in README.md
    parent: Entry | None = None
    children: list[Entry] = field(default_factory=list)

    @property
    def is_folder(self) -> bool:
        return self.path.endswith("/")

    def child_prefix(self) -> str:
        """The tree prefix of a line naming an entry of this folder."""
        chain: list[Entry] = []
        node: Entry | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return "".join("    " if each.last else "│   " for each in reversed(chain))


def layout_block() -> tuple[list[str], int]:
    """The map's lines and the README line number of its first one."""
    lines = README.read_text().splitlines()
    assert HEADING in lines, f"README.md has no {HEADING!r} section (the layout map)"
    start = lines.index(HEADING)
    fence = next(n for n in range(start, len(lines)) if lines[n].startswith("```"))
    end = next(n for n in range(fence + 1, len(lines)) if lines[n].startswith("```"))
    return lines[fence + 1 : end], fence + 2


def parse_map() -> list[Entry]:
    block, first_number = layout_block()
    assert block and block[0] == "openalice-scheduler/", "the layout map starts with the line `openalice-scheduler/`"
    entries: list[Entry] = []
    open_folders: list[Entry] = []  # the folder entry at each depth above the current line
    for offset, line in enumerate(block[1:], start=1):
        number = first_number + offset
        found = _ENTRY.match(line)
        if found is None:
            assert "├" not in line and "└" not in line, f"README.md:{number}: not a layout map entry: {line!r}"
            assert entries and line.strip(), f"README.md:{number}: a continuation line with no entry above it"
            continue
        depth = len(found["prefix"]) // 4
        assert depth <= len(open_folders), f"README.md:{number}: indented past its folder: {line!r}"
        del open_folders[depth:]
        parent = open_folders[-1] if open_folders else None
        assert parent is None or parent.is_folder, f"README.md:{number}: under {parent.path}, which is no folder"
        base = parent.path if parent is not None else ""
        entry = Entry(base + found["name"], depth, found["branch"] == "└", line, number, parent)
        if parent is not None:
            parent.children.append(entry)
        entries.append(entry)
        open_folders.append(entry)
    return entries


def modules() -> Iterator[str]:
    for root in MODULE_ROOTS:
        for path in (REPO / root).rglob("*.py"):
            relative = path.relative_to(REPO)
            if path.name != "__init__.py" and not _skipped(relative):
                yield relative.as_posix()


def folders_of_tests() -> Iterator[str]:
    for path in [REPO / TESTS, *(REPO / TESTS).rglob("*")]:
        relative = path.relative_to(REPO)
        if path.is_dir() and not _skipped(relative):
            yield relative.as_posix() + "/"


def _skipped(relative: Path) -> bool:
    return any(part in NOT_SOURCES or part.startswith(".") for part in relative.parts)


def _fail_with(problems: list[str]) -> None:
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def where_to_add(path: str, entries: list[Entry]) -> str:
    """The line to add for `path`, and under which line of the map."""
    folders = [entry for entry in entries if entry.is_folder and path.startswith(entry.path)]
    if not folders:
        return f"  add a top-level line `├── {path}  <what it is, in a few words>`"
    folder = max(folders, key=lambda entry: len(entry.path))
    line = f"{folder.child_prefix()}├── {path[len(folder.path) :]}  <what it is, in a few words>"
    return f"  under README.md:{folder.number} `{folder.line.rstrip()}`\n  add the line `{line}`"


def _missing(wanted: list[str], entries: list[Entry]) -> list[str]:
    named = {entry.path for entry in entries}
    return [
        f"README.md's layout map ({HEADING}) does not name {path}:\n{where_to_add(path, entries)}"
        for path in sorted(set(wanted) - named)
    ]


def test_every_module_has_its_line_in_the_layout_map() -> None:
    entries = parse_map()
    problems = _missing(list(modules()), entries)
    _fail_with(problems)


def test_every_test_folder_has_its_line_in_the_layout_map() -> None:
    entries = parse_map()
    problems = _missing(list(folders_of_tests()), entries)
    _fail_with(problems)


def test_every_entry_of_the_layout_map_exists() -> None:
    stale = []
    for entry in parse_map():
        target = entry.path.rstrip("/")
        found = glob.glob(target, root_dir=REPO) if any(char in target for char in "*?[") else [target]
        kind = Path.is_dir if entry.is_folder else Path.is_file
        if not any(kind(REPO / each) for each in found):
            what = "folder" if entry.is_folder else "file"
            stale.append(
                f"README.md:{entry.number} names the {what} {entry.path}, which does not exist: remove the line "
                f"`{entry.line.rstrip()}` (or correct its path)"
            )
    _fail_with(stale)


def test_the_layout_map_names_each_path_once() -> None:
    seen: dict[str, Entry] = {}
    twice = []
    for entry in parse_map():
        if entry.path in seen:
            twice.append(
                f"README.md's layout map names {entry.path} on line {seen[entry.path].number} and again on line "
                f"{entry.number}: keep one"
            )
        seen.setdefault(entry.path, entry)
    _fail_with(twice)


def test_each_folder_of_the_layout_map_ends_with_its_last_entry() -> None:
    """`└──` marks the last entry of its folder and only that one, so that a pasted line keeps the tree drawn."""
    wrong = []
    top: list[Entry] = []
    for entry in parse_map():
        if entry.parent is None:
            top.append(entry)
    for siblings in [top, *(entry.children for entry in parse_map() if entry.children)]:
        for index, entry in enumerate(siblings):
            if entry.last != (index == len(siblings) - 1):
                branch = "└──" if index == len(siblings) - 1 else "├──"
                wrong.append(f"README.md:{entry.number} `{entry.line.rstrip()}` should begin its entry with {branch}")
    _fail_with(wrong)
