"""`make run`'s start: a bad setting is one line naming its variable (exit status 2, no traceback, nothing
started), and what it says about INTERNAL_SECRET is what it did; its gateway reads a request as API Gateway does."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from devstack.__main__ import main
from devstack.gateway import LocalHttpApi
from devstack.lambdas import LocalLambda
from devstack.settings import fleet_hosts, seconds
from devstack.stack import internal_secret
from devstack.template import RouteSpec, SamTemplate
from scheduler.errors import ConfigurationError


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This process's environment with none of the variables these tests set (their defaults are valid)."""
    for name in ("DOCKER_HOSTS", "PORT", "LOCAL_TTL_LAG_SECONDS", "DYNAMODB_FAULTS", "PROVIDERS", "LIVE_INDEX_SHARDS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`python -m devstack`'s exit status and what it printed. Its state directory is a file: a stack that
    got past its settings fails at once (the first thing it makes), and never runs on."""
    blocked = tmp_path / "state"
    blocked.write_text("")
    status = main(["--state-dir", str(blocked), "--no-persist"])
    return status, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('[{"name": "gpu-a", "host": "tcp://127.0.0.1:1"', "must be a JSON list of hosts: Expecting ',' delimiter"),
        ('[{"name": "gpu-a\\n", "host": "tcp://127.0.0.1:1"}]', "host 0: name must be 1-40 of a-z, 0-9 and '-'"),
        ("{}", "must be a non-empty JSON list of hosts"),
    ],
)
def test_a_malformed_docker_hosts_stops_make_run_with_one_line_naming_it(
    environ: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str, problem: str
) -> None:
    environ.setenv("DOCKER_HOSTS", raw)

    status, lines = started(tmp_path, capsys)

    assert status == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("[devstack] invalid configuration: DOCKER_HOSTS=")
    assert problem in lines[0]


def test_a_malformed_docker_hosts_is_named_where_the_stack_reads_its_hosts() -> None:
    with pytest.raises(ConfigurationError, match=r"^invalid configuration: DOCKER_HOSTS: must be a JSON list"):
        fleet_hosts({"DOCKER_HOSTS": "["})


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("PORT", "\u0663\u0660\u0660\u0660", "must be a TCP port from 1 to 65535"),  # int() reads ٣٠٠٠ as 3000
        ("PORT", "http", "must be a TCP port from 1 to 65535"),
        ("LOCAL_TTL_LAG_SECONDS", "soon", "must be a number of seconds"),
        ("LIVE_INDEX_SHARDS", "\u0663", "must be a whole number in the digits 0-9"),
    ],
)
def test_a_bad_setting_stops_make_run_with_one_line_naming_it(
    environ: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    problem: str,
) -> None:
    environ.setenv(variable, value)

    status, lines = started(tmp_path, capsys)

    assert status == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"[devstack] invalid configuration: {variable}={value!r}: {problem}")


def test_bad_dynamodb_faults_stop_make_run_with_one_line(
    environ: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    environ.setenv("DYNAMODB_FAULTS", "conflict=lots")

    assert started(tmp_path, capsys) == (
        2,
        ["[devstack] invalid configuration: DYNAMODB_FAULTS: conflict needs a number, not 'lots'"],
    )


@pytest.mark.parametrize("value", ["0", "-1", "\u0662", "1_0", "inf", "nan", "soon"])
def test_a_schedule_interval_is_a_positive_number_of_seconds_in_ascii_digits(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^invalid configuration: SWEEP_INTERVAL_SECONDS="):
        seconds({"SWEEP_INTERVAL_SECONDS": value}, "SWEEP_INTERVAL_SECONDS", 60.0)


def test_a_schedule_interval_is_read_or_defaulted() -> None:
    assert seconds({"SWEEP_INTERVAL_SECONDS": "2.5"}, "SWEEP_INTERVAL_SECONDS", 60.0) == 2.5
    assert seconds({"SWEEP_INTERVAL_SECONDS": " "}, "SWEEP_INTERVAL_SECONDS", 60.0) == 60.0


def test_make_run_says_it_generated_the_secret_then_that_it_reuses_it(
    environ: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environ.delenv("INTERNAL_SECRET", raising=False)
    path = tmp_path / "internal-secret"

    secret, first = internal_secret(tmp_path)
    again, second = internal_secret(tmp_path)

    assert again == secret
    assert first == f"INTERNAL_SECRET not set; generated one in {path} (mode 0600)"
    assert second == f"INTERNAL_SECRET not set; reusing the one in {path}"


def test_make_run_says_nothing_of_a_secret_from_the_environment(environ: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environ.setenv("INTERNAL_SECRET", "from-the-shell")

    assert internal_secret(tmp_path) == ("from-the-shell", None)


def test_a_local_route_matches_the_whole_path_only() -> None:
    route = RouteSpec("GET", "/v1/leases", "ListLeasesFunction", True)
    assert route.match("GET", "/v1/leases") == {}
    assert route.match("GET", "/v1/leases\n") is None  # `$` matched before the newline


@pytest.mark.parametrize("length", ["-1", "abc", "1_0", "\u00b3"])
def test_the_local_gateway_answers_400_to_a_content_length_that_is_no_number(length: str) -> None:
    api = LocalHttpApi(("127.0.0.1", 0), SamTemplate.load(), LocalLambda({}, {}))
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(api.server_address[:2], timeout=5) as connection:
            request = f"POST /v1/lease HTTP/1.1\r\nHost: local\r\nContent-Length: {length}\r\n\r\n{{}}"
            connection.sendall(request.encode("latin-1"))
            answer = connection.makefile("rb").readline()
    finally:
        api.shutdown()
        api.server_close()
    assert answer.startswith(b"HTTP/1.1 400")
