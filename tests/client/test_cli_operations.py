"""`leasectl` operations against the fake lease API: health, --version, list filters, logs, release --all,
completion, status colours and the example in every subcommand's --help."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from openalice_scheduler_client import SchedulerClient, __version__
from openalice_scheduler_client.cli import build_parser, format_table
from openalice_scheduler_client.cli_style import paint_status, wants_colour
from openalice_scheduler_client.models import Lease

from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_cli import cli_env, closed_port_url, leasectl, run


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return list(action.choices)


# --- help, version, health -------------------------------------------------------------------------


@pytest.mark.parametrize("command", subcommands())
def test_every_subcommands_help_ends_with_an_example(command: str) -> None:
    code, out, _ = run(None, command, "--help")
    assert code == 0
    assert "\nexample:\n  " in out
    example = out.split("\nexample:\n", 1)[1]
    assert "leasectl" in example and f" {command}" in example


def test_the_top_help_names_every_subcommand_and_the_exit_codes() -> None:
    code, out, _ = run(None, "--help")
    assert code == 0
    assert all(command in out for command in subcommands())
    assert "exit codes: 0 success, 1 the API refused or failed, 2 usage error, 3 service unreachable" in out


def test_version_prints_the_client_version() -> None:
    assert run(None, "--version")[:2] == (0, f"leasectl {__version__}\n")


def test_health_says_the_service_answers(fake: FakeScheduler) -> None:
    code, out, _ = run(fake, "health")
    assert (code, out) == (0, f"ok: openalice-scheduler at {fake.url}\n")


def test_health_json_prints_the_apis_body(fake: FakeScheduler) -> None:
    code, out, _ = run(fake, "--json", "health")
    assert (code, json.loads(out)) == (0, {"status": "ok", "service": "openalice-scheduler"})


def test_health_of_an_unreachable_service_exits_3() -> None:
    result = leasectl("--url", closed_port_url(), "health")
    assert result.returncode == 3 and "cannot reach the scheduler" in result.stderr


# --- list filters ----------------------------------------------------------------------------------


def test_list_filters_by_provider_on_the_server(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="a")
    code, out, _ = run(fake, "--json", "list", "--provider", "runpod")
    assert code == 0 and json.loads(out)["leases"] == []
    assert fake.calls("GET", "/v1/leases")[0].query["provider"] == "runpod"


def test_list_filters_by_status(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="a")
    assert json.loads(run(fake, "--json", "list", "--status", "pending")[1])["leases"] == []
    assert len(json.loads(run(fake, "--json", "list", "--status", "active")[1])["leases"]) == 1


def test_list_refuses_a_status_it_never_lists(fake: FakeScheduler) -> None:
    code, _, err = run(None, "list", "--status", "released")
    assert code == 2 and "invalid choice" in err


# --- logs ------------------------------------------------------------------------------------------


def test_logs_print_the_workers_output(fake: FakeScheduler) -> None:
    lease = fake.add_lease(owner_id="me")
    fake.write(lease["lease_id"], "frame 1", "frame 2", "done")
    code, out, _ = run(fake, "logs", lease["lease_id"], "--owner", "me", "--tail", "2")
    assert (code, out) == (0, "frame 2\ndone\n")
    assert fake.calls("GET", r"/v1/lease/.*/logs")[0].header("X-Lease-Owner") == "me"


def test_logs_of_an_ended_lease_exit_1_naming_gone(fake: FakeScheduler) -> None:
    lease = fake.add_lease()
    fake.expire(lease["lease_id"])
    code, _, err = run(fake, "logs", lease["lease_id"])
    assert code == 1 and "gone:" in err


@pytest.mark.parametrize("tail", ["0", "5001", "many"])
def test_logs_refuse_a_tail_out_of_bounds(tail: str) -> None:
    code, _, err = run(None, "logs", "some-id", "--tail", tail)
    assert code == 2 and "--tail" in err


def test_logs_follow_print_new_lines_once_and_stop_when_the_lease_ends(fake: FakeScheduler) -> None:
    lease = fake.add_lease()
    lease_id = lease["lease_id"]
    fake.write(lease_id, "one", "two", at="2026-11-30T17:00:00.000000001Z")

    def later() -> None:
        time.sleep(0.3)
        fake.write(lease_id, "three", at="2026-11-30T17:00:00.000000001Z")  # the same instant as "two"
        fake.write(lease_id, "four", at="2026-11-30T17:00:01Z")
        time.sleep(0.3)
        fake.expire(lease_id)

    writer = threading.Thread(target=later)
    writer.start()
    code, out, err = run(fake, "logs", lease_id, "--follow", "--interval", "0.1")
    writer.join()

    assert (code, out) == (0, "one\ntwo\nthree\nfour\n")
    assert "no more output" in err


# --- release --all ---------------------------------------------------------------------------------


def test_release_all_releases_the_owners_leases_and_leaves_the_others(fake: FakeScheduler) -> None:
    mine = {fake.add_lease(owner_id="anim-svc")["lease_id"] for _ in range(3)}
    theirs = fake.add_lease(owner_id="live-control")

    code, out, _ = run(fake, "release", "--owner", "anim-svc", "--all")

    assert code == 0
    assert out.splitlines()[-1] == "released 3 leases of anim-svc"
    assert {line.split()[1] for line in out.splitlines()[:-1]} == mine
    assert fake.leases[theirs["lease_id"]]["status"] == "active"
    (call,) = fake.calls("DELETE", "/v1/leases")
    assert (call.query["owner_id"], call.header("X-Lease-Owner")) == ("anim-svc", "anim-svc")


def test_release_all_follows_the_continuation(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.page_size = 2
    for _ in range(5):
        fake.add_lease(owner_id="anim-svc")
    result = client.release_all("anim-svc")
    assert (len(result.released), result.calls, result.complete) == (5, 3, True)


def test_release_all_json_prints_every_lease_released(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="anim-svc")
    code, out, _ = run(fake, "--json", "release", "--owner", "anim-svc", "--all")
    body = json.loads(out)
    assert code == 0 and len(body["released"]) == 1 and body["not_released"] == [] and body["next_token"] is None


@pytest.mark.parametrize(
    "argv",
    [["release"], ["release", "--all"], ["release", "some-id", "--owner", "o", "--all"]],
)
def test_release_needs_an_id_or_an_owner_with_all(fake: FakeScheduler, argv: list[str]) -> None:
    code, _, err = run(None, *argv)
    assert code == 2 and "usage:" in err and fake.requests == []


# --- completion ------------------------------------------------------------------------------------


def test_the_bash_completion_script_loads_in_bash(tmp_path: Path) -> None:
    # `leasectl` on PATH as an installed client puts it, then exactly what a user's .bashrc runs.
    (tmp_path / "leasectl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m openalice_scheduler_client.cli "$@"\n')
    (tmp_path / "leasectl").chmod(0o755)
    env = cli_env(PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    loaded = subprocess.run(
        ["bash", "-c", "source <(leasectl completion bash); complete -p leasectl"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "complete -F _leasectl leasectl"


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("leasectl lo", "logs"),
        ("leasectl list --status ", "pending active releasing queued"),
        ("leasectl --url http://x acquire --kind ", "renderer anim"),
        ("leasectl release --a", "--all"),
        ("leasectl completion ", "bash zsh fish"),
    ],
)
def test_bash_completes_subcommands_options_and_choices(words: str, expected: str) -> None:
    script = leasectl("completion", "bash").stdout
    parts = words.split(" ")
    probe = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(part) for part in parts)}); COMP_CWORD={len(parts) - 1}; "
        '_leasectl; echo "${COMPREPLY[*]}"'
    )
    result = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == expected, result.stderr


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_subcommand(shell: str) -> None:
    result = leasectl("completion", shell)
    assert result.returncode == 0
    assert all(command in result.stdout for command in subcommands())
    if shutil.which(shell):  # neither shell is installed on the CI machines; where one is, it loads the script
        loader = "source /dev/stdin" if shell == "zsh" else "source -"
        loaded = subprocess.run([shell, "-c", loader], input=result.stdout, capture_output=True, text=True)
        assert loaded.returncode == 0, loaded.stderr


# --- colours ---------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_statuses_are_coloured_on_a_terminal() -> None:
    assert wants_colour(Terminal(), {}) is True
    assert paint_status("active", "active") == "\x1b[32mactive\x1b[0m"


def test_no_color_switches_colours_off() -> None:
    assert wants_colour(Terminal(), {"NO_COLOR": "1"}) is False


def test_output_that_is_not_a_terminal_is_never_coloured(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="a")
    code, out, _ = run(fake, "list")
    assert code == 0 and "\x1b[" not in out


def test_a_coloured_table_keeps_its_columns_aligned(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="a")
    leases = [Lease.from_wire(lease) for lease in fake.leases.values()]
    plain = format_table(leases)
    coloured = format_table(leases, paint=paint_status)
    assert [line.replace("\x1b[32m", "").replace("\x1b[0m", "") for line in coloured] == plain


def test_following_logs_takes_only_an_ascii_stamp_for_a_time() -> None:
    from types import SimpleNamespace

    from openalice_scheduler_client.cli_ops import _print_new

    out = io.StringIO()
    ctx = SimpleNamespace(stdout=out, args=SimpleNamespace(timestamps=False))
    line = "\u0662\u0660\u0662\u0666-11-30T17:00:00Z text"  # ٢٠٢٦: the API would refuse it as `since`

    assert _print_new(ctx, [line], None) is None  # type: ignore[arg-type]
    assert out.getvalue() == line + "\n"  # printed whole, as any line without a stamp
