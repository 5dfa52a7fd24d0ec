"""The functions' log lines (`scheduler.observability.log`): powertools' JSON shape, keys shared by a function's
logger and the layer's child loggers, each line written once, whole, whatever the threads."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.lambda_environment import LambdaContext
from scheduler.observability import log
from scheduler.observability.log import Logger

REPO = Path(__file__).resolve().parents[2]
TRACE = "Root=1-67a1b2c3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"
# One invocation as a function and a layer module log in it; {logger} is powertools' or ours.
PROGRAM = """
import sys
from {module} import Logger
logger = Logger()
child = Logger(child=True)
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "AcquireLeaseFunction", 256, "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:AcquireLeaseFunction"
@logger.inject_lambda_context(clear_state=True, log_event=False)
def handler(event, context):
    logger.append_keys(lease_id=event["lease_id"], owner_id="anim-service")
    child.info("lease acquired", extra={{"provider": "local-docker", "attempts": 2}})
    logger.warning("retrying %s", "release")
    logger.debug("not at INFO")
    try:
        raise ValueError("no such worker")
    except ValueError:
        child.exception("release failed", extra={{"lease_id": "another"}})
handler({{"lease_id": "l-1"}}, Context())
handler({{"lease_id": "l-2"}}, Context())
"""


def _lines(module: str, **environment: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(module=module)],
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(REPO / "layers" / "scheduler"),
            "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
            "_X_AMZN_TRACE_ID": TRACE,
            "TZ": "UTC",
            **environment,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_line_has_powertools_keys_in_powertools_order() -> None:
    ours, theirs = _lines("scheduler.observability.log"), _lines("aws_lambda_powertools")
    assert [list(line) for line in ours] == [list(line) for line in theirs]
    for mine, its in zip(ours, theirs, strict=True):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\+0000", mine.pop("timestamp"))
        its.pop("timestamp")
        assert mine == its


def test_a_line_carries_the_invocation_the_appended_keys_and_its_extra() -> None:
    first = _lines("scheduler.observability.log")[0]
    assert first["function_request_id"] == "req-1" and first["cold_start"] is True
    assert (first["lease_id"], first["owner_id"], first["provider"]) == ("l-1", "anim-service", "local-docker")
    assert first["xray_trace_id"] == "1-67a1b2c3-0123456789abcdef01234567"
    assert first["service"] == "openalice-scheduler"


def test_an_exception_line_carries_its_traceback() -> None:
    failed = _lines("scheduler.observability.log")[2]
    assert failed["level"] == "ERROR" and failed["exception_name"] == "ValueError"
    assert failed["exception"].startswith("Traceback") and "no such worker" in failed["exception"]


def test_the_next_invocation_starts_without_the_previous_ones_keys() -> None:
    second = _lines("scheduler.observability.log")[3]
    assert second["cold_start"] is False and second["lease_id"] == "l-2"


@pytest.mark.parametrize("variable", ["POWERTOOLS_LOG_LEVEL", "LOG_LEVEL"])
def test_the_level_comes_from_the_environment(variable: str) -> None:
    lines = _lines("scheduler.observability.log", **{variable: "DEBUG"})
    assert "not at INFO" in [line["message"] for line in lines]


def test_a_root_handler_such_as_lambdas_writes_no_second_copy() -> None:
    program = (
        "import logging, sys; logging.basicConfig(stream=sys.stdout, format='ROOT %(message)s', level='INFO')\n"
        + PROGRAM.format(module="scheduler.observability.log")
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "layers" / "scheduler")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert [line for line in done.stdout.splitlines() if line.startswith("ROOT")] == []
    assert len(done.stdout.splitlines()) == 6  # three lines per invocation


class Written(io.StringIO):
    """A function logger's stream: the lines written, each once."""

    def lines(self) -> list[str]:
        return self.getvalue().splitlines()


SERVICE = "log-test-service"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Iterator[Written]:
    """A service no logger has used yet in this process (as in a fresh execution environment)."""
    monkeypatch.setitem(log._SERVICES, SERVICE, log._Keys(SERVICE))
    yield Written()
    handler = log._SERVICES[SERVICE].handler
    if handler is not None:
        logging.getLogger(SERVICE).removeHandler(handler)


def test_a_child_logger_made_before_the_functions_shares_its_keys(written: Written) -> None:
    child = Logger(SERVICE, child=True)
    function = Logger(SERVICE, stream=written)
    function.append_keys(lease_id="l-9")
    child.info("from the layer")
    (line,) = written.lines()
    assert json.loads(line)["lease_id"] == "l-9"
    assert child.name == f"{SERVICE}.{__name__}"


def test_threads_logging_while_keys_change_write_whole_lines(written: Written) -> None:
    function = Logger(SERVICE, stream=written)
    child = Logger(SERVICE, child=True)

    def release(number: int) -> None:
        for step in range(200):
            child.info("released", extra={"worker": number, "step": step})

    threads = [threading.Thread(target=release, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for step in range(200):
        function.append_keys(**{f"key_{step}": step})
    for thread in threads:
        thread.join()
    assert len(written.lines()) == 800
    assert all(json.loads(line)["message"] == "released" for line in written.lines())


def test_records_still_reach_pytests_caplog(caplog: pytest.LogCaptureFixture, written: Written) -> None:
    Logger(SERVICE, stream=written)
    Logger(SERVICE, child=True).warning("seen", extra={"lease_id": "l-3"})
    (record,) = [record for record in caplog.records if record.getMessage() == "seen"]
    assert getattr(record, "lease_id") == "l-3"  # noqa: B009 - an extra key, no declared attribute


def test_a_decorated_handler_gets_its_event_and_context_and_answers(written: Written) -> None:
    logger = Logger(SERVICE, stream=written)
    handler = logger.inject_lambda_context(lambda event, context: (event, context.aws_request_id), clear_state=True)
    assert handler({"a": 1}, LambdaContext("f", 128, "req-7", 0)) == ({"a": 1}, "req-7")
    assert logger.get_current_keys()["function_request_id"] == "req-7"
