"""A worker's output: times to the nanosecond, the lines a query selects, the 1 MiB bound, and how each
driver's raw answer (RunPod's Server-Sent Events; Docker's in test_docker_logs.py) becomes lines."""

from __future__ import annotations

import json

import pytest

from scheduler.providers.runpod.logs import _parse_event, format_time_seconds, pod_log_request
from scheduler.worker_logs import LogLine, LogQuery, format_ns, parse_rfc3339_ns, render, select

SECOND = 1_000_000_000
T0 = parse_rfc3339_ns("2026-11-30T17:00:00Z") or 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T17:00:00Z", T0),
        ("2026-11-30T17:00:00.000000001Z", T0 + 1),
        ("2026-11-30T17:00:00.5Z", T0 + SECOND // 2),
        ("2026-11-30T18:00:00+01:00", T0),
        ("2026-11-30t17:00:00z", T0),
        ("2026-11-30T17:00:00.250000+00:00", T0 + SECOND // 4),
    ],
)
def test_rfc3339_times_are_read_to_the_nanosecond(text: str, expected: int) -> None:
    assert parse_rfc3339_ns(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "2026-11-30",
        "2026-11-30T17:00:00",
        "17:00:00Z",
        "",
        "20261130T170000Z",  # other ISO 8601 forms `datetime.fromisoformat` reads
        "2026-W49-1T17:00:00Z",
        "2026-334T17:00:00Z",
        "2026-11-30T17:00:00+0100",
        "2026-11-30 17:00:00Z",  # the space RFC 3339's note allows for `T`: not its grammar's
        " 2026-11-30T17:00:00Z",
        "2026-11-30T17:00:00Z\n",
        "\u0662\u0660\u0662\u0666-11-30T17:00:00Z",  # Arabic-Indic digits
        "2026-02-30T17:00:00Z",
    ],
)
def test_what_is_no_rfc3339_date_time_is_refused(text: str) -> None:
    assert parse_rfc3339_ns(text) is None


def test_times_are_written_to_the_nanosecond_and_whole_seconds_without_a_fraction() -> None:
    assert format_ns(T0 + 123_456_789) == "2026-11-30T17:00:00.123456789Z"
    assert format_ns(T0) == "2026-11-30T17:00:00Z"


def test_a_query_selects_the_last_tail_lines_at_or_after_since() -> None:
    lines = [LogLine(T0 + offset, f"line {offset}") for offset in range(6)]
    assert [line.text for line in select(lines, LogQuery(tail=2))] == ["line 4", "line 5"]
    assert [line.text for line in select(lines, LogQuery(tail=10, since_ns=T0 + 3))] == ["line 3", "line 4", "line 5"]


def test_rendering_keeps_the_newest_lines_within_the_byte_bound() -> None:
    lines = [LogLine(T0, "x" * 9) for _ in range(5)]  # 10 bytes each with the newline
    rendered = render(lines, timestamps=False, max_bytes=35)
    assert (rendered.text, rendered.lines, rendered.truncated) == (("x" * 9 + "\n") * 3, 3, True)


def test_rendering_marks_a_providers_own_lines_and_stamps_on_request() -> None:
    rendered = render([LogLine(T0, "pod is RUNNING", "system"), LogLine(T0 + 1, "ready")], timestamps=True)
    assert rendered.text == "2026-11-30T17:00:00Z [system] pod is RUNNING\n2026-11-30T17:00:00.000000001Z ready\n"


def test_a_runpod_event_becomes_a_line_with_its_source() -> None:
    data = json.dumps({"ts": "2026-11-30T17:00:00Z", "source": "container", "line": "Model loaded."})
    assert _parse_event(f"id: 2026-11-30T17:00:00Z/000000000001\ndata: {data}".encode()) == LogLine(
        T0, "Model loaded.", "container"
    )
    assert _parse_event(b": a comment, no data") is None


def test_runpod_is_asked_for_tail_or_for_since_to_the_whole_second() -> None:
    assert pod_log_request("pod1", LogQuery(tail=50)) == ("/v2/pods/pod1/logs", {"tail": "50"})
    since = LogQuery(tail=50, since_ns=T0 + 999)
    assert pod_log_request("pod1", since) == ("/v2/pods/pod1/logs", {"since": "2026-11-30T17:00:00Z"})
    assert format_time_seconds(-5 * SECOND) == "1970-01-01T00:00:00Z"


def test_the_byte_bound_counts_the_body_as_lambda_carries_it_json_escaped() -> None:
    coloured = "\x1b[32mok\x1b[0m"  # each ESC travels as \u001b: six bytes
    rendered = render([LogLine(T0, coloured) for _ in range(3)], timestamps=False, max_bytes=2 * 25)
    assert rendered.lines == 2
