"""Long lines in a real container's logs (Engine 20.10 over mutual TLS): a line over 16 KiB comes back as written,
one over 1 MiB as its end, and 30 MB are read within the logs route's deadline in bounded memory.

Each container runs the busybox worker image with a shell command, then exits; the driver reads its logs by id.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import docker  # type: ignore[import-untyped]
import pytest

from devstack.worker_image import WORKER_IMAGES
from scheduler.deadline import Deadline
from scheduler.models import WorkerKind
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.docker_engine.client import connect
from scheduler.providers.local_docker.driver import LocalDockerProvider
from scheduler.runtime import API_GATEWAY_TIMEOUT_SECONDS, REQUEST_RESERVE_SECONDS
from scheduler.worker_logs import MAX_LOG_BYTES, LogQuery, render

IMAGE = WORKER_IMAGES["renderer"]
# What the logs route gives a provider: API Gateway's 30 s less the request's reserve.
ROUTE_DEADLINE_SECONDS = API_GATEWAY_TIMEOUT_SECONDS - REQUEST_RESERVE_SECONDS

Printed = Callable[..., str]


@pytest.fixture
def provider(docker_host: Any) -> Iterator[LocalDockerProvider]:
    client = connect(docker_host.env())
    images = {WorkerKind.RENDERER: IMAGE, WorkerKind.ANIM: IMAGE}
    yield LocalDockerProvider(connect=lambda: client, images=images, network="none", worker_port=8080)
    client.close()


@pytest.fixture
def printed(docker_client: docker.DockerClient) -> Iterator[Printed]:
    """Run `script` in a container to its end; its id (removed after the test)."""
    made: list[Any] = []

    def run(script: str, *, tty: bool = False) -> str:
        container = docker_client.containers.run(IMAGE, ["sh", "-c", script], detach=True, tty=tty, network_mode="none")
        made.append(container)
        assert container.wait(timeout=120)["StatusCode"] == 0
        return str(container.id)

    yield run
    for container in made:
        container.remove(force=True)


def _repeat(byte: str, count: int) -> str:
    return f"head -c {count} /dev/zero | tr '\\0' '{byte}'"


@pytest.mark.parametrize("tty", [False, True], ids=["multiplexed", "tty"])
def test_a_40_kib_line_with_carriage_returns_comes_back_byte_identical(
    provider: LocalDockerProvider, printed: Printed, tty: bool
) -> None:
    script = f"{_repeat('a', 20000)}; printf 'progress 50%%\\r'; {_repeat('b', 20000)}; echo; echo after"
    container = printed(script, tty=tty)

    lines = provider.logs("lease-1", container, LogQuery(tail=10))

    assert [line.text for line in lines] == ["a" * 20000 + "progress 50%\r" + "b" * 20000, "after"]
    assert not lines.truncated  # type: ignore[attr-defined]


def test_pieces_of_long_stdout_and_stderr_lines_written_at_once_are_joined_per_stream(
    provider: LocalDockerProvider, printed: Printed
) -> None:
    container = printed(f"({_repeat('o', 40000)}; echo) & ({_repeat('e', 40000)}; echo) >&2; wait; echo end")

    texts = sorted(line.text for line in provider.logs("lease-1", container, LogQuery(tail=10)))

    assert texts == ["e" * 40000, "end", "o" * 40000]


def test_a_3_mb_line_without_a_newline_is_answered_as_its_last_mebibyte(
    provider: LocalDockerProvider, printed: Printed
) -> None:
    container = printed(f"{_repeat('x', 3_000_000)}; printf END")

    lines = provider.logs("lease-1", container, LogQuery(tail=200))
    rendered = render(lines, timestamps=False)

    assert len(lines) == 1 and lines[0].text.endswith("xEND") and len(lines[0].text) == MAX_LOG_BYTES
    assert rendered.truncated and rendered.lines == 1
    assert rendered.text.endswith("xxEND\n") and len(rendered.text) > MAX_LOG_BYTES - 8


def test_30_mb_with_tail_5000_are_read_well_within_the_deadline_in_bounded_memory(
    provider: LocalDockerProvider, printed: Printed
) -> None:
    container = printed(f"{_repeat('y', 30_000_000)}; echo; echo last")
    deadline = Deadline.within(ROUTE_DEADLINE_SECONDS)

    tracemalloc.start()
    started = time.monotonic()
    try:
        lines = provider.logs("lease-1", container, LogQuery(tail=5000), deadline)
        took = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    print(f"\n30 MB, tail=5000: read in {took:.2f} s, Python peak {peak / 1e6:.1f} MB")
    assert [len(line.text) for line in lines] == [MAX_LOG_BYTES - 4, 4] and lines.truncated  # type: ignore[attr-defined]
    assert set(lines[0].text) == {"y"} and lines[1].text == "last"
    assert took < ROUTE_DEADLINE_SECONDS / 3
    assert peak < 16 * MAX_LOG_BYTES


@pytest.mark.parametrize("seconds", [0.05, 0.2, 0.5])
def test_a_read_never_outlasts_its_deadline(provider: LocalDockerProvider, printed: Printed, seconds: float) -> None:
    container = printed(f"i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done; {_repeat('z', 30_000_000)}")
    provider.logs("lease-1", container, LogQuery(tail=1))  # connected and negotiated: only this read is timed

    started = time.monotonic()
    try:
        lines = provider.logs("lease-1", container, LogQuery(tail=5000), Deadline.within(seconds))
        outcome = f"{len(lines)} lines, truncated={lines.truncated}"  # type: ignore[attr-defined]
    except ProviderRequestFailed as error:  # the engine had not begun to answer by then
        outcome = f"refused: {error}"
    took = time.monotonic() - started

    print(f"\ndeadline {seconds} s: {outcome} in {took:.3f} s")
    assert took < seconds + 0.5
