"""`leasectl` against the fake lease API: output shapes, --json, exit codes, spinner and watch on a TTY."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openalice_scheduler_client import Lease, SchedulerClient
from openalice_scheduler_client.cli import format_remaining, format_table, main
from openalice_scheduler_client.cli_usage import format_usage

from tests.client.conftest import CLIENT_SRC
from tests.client.fake_scheduler import FakeScheduler

COMMANDS = ["acquire", "list", "get", "renew", "release", "watch"]


def run(fake: FakeScheduler | None, *argv: str, secret: str | None = None) -> tuple[int, str, str]:
    """leasectl in-process with --url/--secret of the fake; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    prefix = [] if fake is None else ["--url", fake.url, "--secret", fake.secret if secret is None else secret]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # argparse writes to sys.*
            code = main([*prefix, *argv], stdout=out, stderr=err)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for `python -m openalice_scheduler_client.cli` without installing the package."""
    own = ("SCHEDULER_URL", "INTERNAL_SECRET", "OPENALICE_SCHEDULER_TOKEN", "OPENALICE_SCHEDULER_AUTH")
    env = {k: v for k, v in os.environ.items() if k not in own}
    env["PYTHONPATH"] = os.pathsep.join([str(CLIENT_SRC), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def leasectl(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """leasectl as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


# --- help and usage --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_command_has_help(command: str | None) -> None:
    code, out, _ = run(None, *([command] if command else []), "--help")

    assert code == 0 and "usage: leasectl" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["acquire"],
        ["acquire", "--kind", "spaceship"],
        ["acquire", "--kind", "renderer", "--gpu", "huge"],
        ["acquire", "--kind", "renderer", "--ttl", "soon"],
        ["acquire", "--kind", "renderer", "--ttl", "0"],
        ["acquire", "--kind", "renderer", "--env", "NOVALUE"],
        ["get"],
        ["get", ""],
        ["renew"],
        ["nonsense"],
        ["watch", "--interval", "0"],
        ["--url", "not-a-url", "list"],
    ],
)
def test_usage_errors_exit_2(fake: FakeScheduler, argv: list[str]) -> None:
    code, out, err = run(None, *argv)

    assert code == 2 and out == "" and "usage:" in err
    assert fake.requests == []


# --- commands --------------------------------------------------------------------------------------


def test_acquire_json_prints_the_apis_body(fake: FakeScheduler) -> None:
    code, out, err = run(
        fake, "--json", "acquire", "--kind", "anim", "--gpu", "none", "--ttl", "60", "--owner", "me",
        "--env", "A=1", "B=x=y", "--env", "C=",
    )  # fmt: skip

    assert code == 0, err
    body = json.loads(out)
    assert set(body) == {"lease", "provider"} and body["provider"] == "fake"
    assert body["lease"]["owner_id"] == "me" and body["lease"]["ttl_seconds"] == 60
    (request,) = fake.calls("POST", "/v1/lease")
    assert request.body["env"] == {"A": "1", "B": "x=y", "C": ""}
    assert request.header("Idempotency-Key")


def test_acquire_prints_the_lease_readably(fake: FakeScheduler) -> None:
    code, out, _ = run(fake, "acquire", "--kind", "renderer")

    assert code == 0
    assert out.startswith("lease_id ") and "status          active" in out and "(in 59m" in out


def test_get_and_renew_print_the_lease(fake: FakeScheduler) -> None:
    lease = fake.add_lease(owner_id="me", ttl_seconds=60)

    code, out, _ = run(fake, "--json", "get", lease["lease_id"])
    assert code == 0 and json.loads(out)["lease"]["lease_id"] == lease["lease_id"]
    code, out, _ = run(fake, "--json", "renew", lease["lease_id"], "--ttl", "120", "--owner", "me")
    assert code == 0 and json.loads(out)["lease"]["ttl_seconds"] == 120
    code, out, _ = run(fake, "renew", lease["lease_id"], "--owner", "me")
    assert code == 0 and "ttl_seconds     120" in out


def test_get_names_who_made_the_lease_and_who_ended_it(fake: FakeScheduler) -> None:
    lease = fake.add_lease(status="released")
    fake.leases[lease["lease_id"]] |= {"created_by": "anim-svc", "ended_by": "sweep"}

    code, out, _ = run(fake, "get", lease["lease_id"])

    assert code == 0
    assert "created_by      anim-svc" in out and "ended_by        sweep" in out


def test_release_json_prints_an_empty_object(fake: FakeScheduler) -> None:
    lease = fake.add_lease()

    code, out, _ = run(fake, "--json", "release", lease["lease_id"])

    assert code == 0 and json.loads(out) == {}
    assert run(fake, "release", fake.add_lease()["lease_id"])[1].startswith("released ")


def test_list_prints_an_aligned_table(fake: FakeScheduler) -> None:
    fake.add_lease(kind="renderer", owner_id="anim-svc", ttl_seconds=600)
    fake.add_lease(kind="anim", gpu="high", ttl_seconds=7200)

    code, out, _ = run(fake, "list")

    header, *rows = out.splitlines()
    assert code == 0 and len(rows) == 2
    assert header.split() == [
        "ID",
        "KIND",
        "GPU",
        "PROVIDER",
        "STATUS",
        "OWNER",
        "REMAINING",
        "$/H",
        "COST",
        "ENDPOINT",
    ]
    for column in ("KIND", "STATUS", "ENDPOINT"):
        assert {row.index(value) for row, value in zip(rows, _column(rows, header, column), strict=True)} == {
            header.index(column)
        }
    assert "anim-svc" in out and "1h59m" in out and " 9m5" in out


def _column(rows: list[str], header: str, name: str) -> list[str]:
    position = header.index(name)
    return [row[position:].split()[0] for row in rows]


def test_list_shows_a_lease_being_released_without_remaining_time(fake: FakeScheduler) -> None:
    """Its worker is not confirmed gone yet (it may still bill): listed, but nothing remains of it to use."""
    releasing = fake.add_lease(owner_id="anim-svc", ttl_seconds=600, status="releasing")
    active = fake.add_lease(owner_id="anim-svc", ttl_seconds=600)

    code, out, _ = run(fake, "list", "--status", "releasing")

    header, *rows = out.splitlines()
    assert code == 0 and [row.split()[0] for row in rows] == [releasing["lease_id"]]
    assert _column(rows, header, "STATUS") == ["releasing"] and _column(rows, header, "REMAINING") == ["-"]
    assert active["lease_id"] in run(fake, "list")[1]


def test_release_all_names_a_lease_still_being_released_and_exits_1(fake: FakeScheduler) -> None:
    releasing = fake.add_lease(owner_id="anim-svc", status="releasing")

    code, out, _ = run(fake, "release", "--owner", "anim-svc", "--all")

    assert code == 1
    assert f"not released {releasing['lease_id']} (releasing): provider_error: " in out


def test_list_json_merges_every_page(fake: FakeScheduler) -> None:
    fake.page_size = 2
    for _ in range(5):
        fake.add_lease(kind="anim")
    fake.add_lease(kind="renderer")

    code, out, _ = run(fake, "--json", "list", "--kind", "anim")

    body = json.loads(out)
    assert code == 0 and len(body["leases"]) == 5 and body["next_token"] is None


def test_list_without_leases_says_so(fake: FakeScheduler) -> None:
    assert run(fake, "list") == (0, "No live leases.\n", "")


# --- failures and exit codes -----------------------------------------------------------------------


def test_api_refusal_exits_1_with_code_and_message_on_stderr(fake: FakeScheduler) -> None:
    code, out, err = run(fake, "get", "missing")

    assert code == 1 and out == ""
    assert err == "leasectl: not_found: lease missing not found\n"


def test_api_refusal_with_json_prints_the_error_envelope(fake: FakeScheduler) -> None:
    code, out, err = run(fake, "--json", "release", "missing")

    assert code == 1
    assert json.loads(out) == {"error": {"code": "not_found", "message": "lease missing not found or not active"}}
    assert "not_found" in err


def test_invalid_request_lists_each_problem(fake: FakeScheduler) -> None:
    fake.fail("POST", "/v1/lease", status=400, body={"error": {
        "code": "invalid_request", "message": "invalid request body: ttl_seconds: too big",
        "details": {"problems": [{"field": "ttl_seconds", "problem": "too big"}]}}})  # fmt: skip

    code, _, err = run(fake, "acquire", "--kind", "renderer", "--ttl", "99999")

    assert code == 1 and "  ttl_seconds: too big" in err


def test_missing_secret_exits_1_with_a_hint(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERNAL_SECRET", raising=False)

    code, _, err = run(fake, "list", secret="")

    assert code == 1 and "unauthorized: Unauthorized" in err and "INTERNAL_SECRET" in err


def test_wrong_secret_exits_1_as_forbidden(fake: FakeScheduler) -> None:
    code, out, err = run(fake, "--json", "list", secret="wrong")

    assert code == 1 and json.loads(out)["error"]["code"] == "forbidden" and "forbidden: Forbidden" in err


def test_unreachable_service_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDULER_URL", closed_port_url())
    monkeypatch.setattr(SchedulerClient, "_sleep", staticmethod(lambda seconds: None))  # retries, but quickly

    code, out, err = run(None, "--json", "get", "x")

    assert code == 3 and json.loads(out)["error"]["code"] == "unreachable"
    *retries, last = err.splitlines()
    assert last.startswith("leasectl: cannot reach the scheduler:") and "connection refused" in last
    assert len(retries) == 4 and all("connection refused; retry" in line for line in retries)


# --- as a process ----------------------------------------------------------------------------------


def test_cli_process_reads_url_and_secret_from_the_environment(fake: FakeScheduler) -> None:
    lease = fake.add_lease()

    result = leasectl("--json", "list", SCHEDULER_URL=fake.url, INTERNAL_SECRET=fake.secret)

    assert result.returncode == 0, result.stderr
    assert [item["lease_id"] for item in json.loads(result.stdout)["leases"]] == [lease["lease_id"]]


def test_cli_process_exit_codes() -> None:
    assert leasectl("--help").returncode == 0
    assert leasectl("acquire").returncode == 2
    assert leasectl("--url", closed_port_url(), "get", "x").returncode == 3  # after its retries


def test_watch_once_prints_one_frame_without_control_codes(fake: FakeScheduler) -> None:
    lease = fake.add_lease(owner_id="me")

    code, out, _ = run(fake, "watch", "--once")

    assert code == 0 and "\x1b" not in out
    assert out.startswith("leasectl watch  http://127.0.0.1:") and "1 live" in out and lease["lease_id"] in out


def test_watch_once_json_is_one_list_document(fake: FakeScheduler) -> None:
    fake.add_lease()

    code, out, _ = run(fake, "--json", "watch", "--once")

    assert code == 0 and len(out.splitlines()) == 1 and len(json.loads(out)["leases"]) == 1


def _read_pty(fd: int, seconds: float, until: Callable[[bytes], bool] = lambda _: False) -> bytes:
    """What the terminal shows within `seconds`, or as soon as `until` holds for it."""
    data = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0 and not until(data):
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


def _spawn_on_pty(argv: list[str], fake: FakeScheduler, *, stream: str) -> tuple[subprocess.Popen[bytes], int]:
    leader, follower = pty.openpty()
    streams: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: follower}
    process = subprocess.Popen(
        [sys.executable, "-m", "openalice_scheduler_client.cli", "--url", fake.url, "--secret", fake.secret, *argv],
        env=cli_env(PYTHONIOENCODING="utf-8"),
        **streams,
    )
    os.close(follower)
    return process, leader


def test_watch_redraws_in_place_on_a_terminal_and_ctrl_c_exits_0(fake: FakeScheduler) -> None:
    fake.add_lease(owner_id="me", ttl_seconds=600)
    process, leader = _spawn_on_pty(["watch", "--interval", "0.2"], fake, stream="stdout")
    try:
        # Three redraws, however slowly a busy machine starts the process.
        screen = _read_pty(leader, 30, until=lambda shown: shown.count(b"\x1b[H") >= 3)
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 0
        screen += _read_pty(leader, 0.3)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()

    assert screen.startswith(b"\x1b[?25l\x1b[2J")
    assert screen.count(b"\x1b[H") >= 3 and b"1 live" in screen
    assert screen.rstrip().endswith(b"\x1b[?25h")
    assert len(fake.calls("GET", "/v1/leases")) >= 3


def test_acquire_shows_a_spinner_on_a_terminal_only(fake: FakeScheduler) -> None:
    fake.acquire_delay = 0.6
    process, leader = _spawn_on_pty(["--json", "acquire", "--kind", "renderer"], fake, stream="stderr")
    try:
        spinner = _read_pty(leader, 3.0)
        stdout = process.communicate(timeout=10)[0]
    finally:
        os.close(leader)

    assert process.returncode == 0
    assert b"acquiring a renderer worker" in spinner and spinner.endswith(b"\r\x1b[K")
    assert json.loads(stdout)["lease"]["kind"] == "renderer"

    code, _, err = run(fake, "acquire", "--kind", "renderer")  # stderr is not a terminal here
    assert code == 0 and err == ""


# --- formatting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "expired"), (0, "expired"), (45, "45s"), (599, "9m59s"), (3600, "1h00m"), (7261, "2h01m")],
)
def test_remaining_time_is_compact(seconds: int, text: str) -> None:
    assert format_remaining(timedelta(seconds=seconds)) == text


def test_table_shows_dashes_for_missing_values_and_no_countdown_for_ended_leases() -> None:
    now = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    lease = Lease.from_wire({
        "lease_id": "l-1", "provider": "", "kind": "anim", "gpu": "none", "status": "released", "endpoint": None,
        "created_at": "2026-11-30T03:00:00Z", "expires_at": "2026-11-30T05:00:00Z", "ttl_seconds": 7200,
    })  # fmt: skip

    (_, row) = format_table([lease], now)

    assert row.split() == ["l-1", "anim", "none", "-", "released", "-", "-", "-", "-", "-"]


def test_list_shows_each_leases_price_and_cost_so_far() -> None:
    now = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    lease = Lease.from_wire({
        "lease_id": "l-1", "provider": "runpod", "kind": "anim", "gpu": "entry", "status": "active", "endpoint": None,
        "created_at": "2026-11-30T03:30:00Z", "expires_at": "2026-11-30T05:00:00Z", "ttl_seconds": 5400,
        "cost_per_hour": 0.69, "cost_usd": 0.345,
    })  # fmt: skip

    header, row = format_table([lease], now)

    assert row.split()[6:9] == ["1h00m", "0.69", "$0.3450"]
    assert header.index("$/H") < header.index("COST") < header.index("ENDPOINT")


def test_usage_prints_a_table_in_dollars_with_a_total() -> None:
    report = {
        "usage": [
            {"owner_id": "anim", "provider": "runpod", "leases": 2, "lease_seconds": 5400, "cost_usd": 1.035},
            {"owner_id": "anim", "provider": "local-docker", "leases": 3, "lease_seconds": 900, "cost_usd": 0.0},
        ],
        "since": "2026-11-30",
        "until": "2026-11-30",
    }

    lines = format_usage(report, "provider")

    assert lines[0].split() == ["OWNER", "PROVIDER", "LEASES", "TIME", "COST"]
    assert lines[1].split() == ["anim", "runpod", "2", "1h30m", "$1.0350"]
    assert lines[3].split() == ["TOTAL", "5", "1h45m", "$1.0350"]
    assert lines[-1] == "UTC days 2026-11-30 to 2026-11-30"


def test_usage_asks_the_api_for_the_owner_days_and_grouping(fake: FakeScheduler) -> None:
    code, out, _ = run(fake, "usage", "--owner", "anim", "--since", "2026-11-01", "--group-by", "kind")

    assert code == 0, out
    assert fake.requests[-1].query == {"owner_id": "anim", "since": "2026-11-01", "group_by": "kind"}
    assert out.splitlines()[0].split() == ["OWNER", "KIND", "LEASES", "TIME", "COST"]


def test_usage_refuses_a_day_that_is_not_one() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["usage", "--since", "yesterday"])
    assert exit_.value.code == 2
