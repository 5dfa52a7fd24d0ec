"""The console in the API's other modes, through the local stack: `secret` (the shared secret, owners asserted with
X-Lease-Owner) and `iam` (a browser cannot sign: the console says it needs token or secret mode)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import open_console, rows
from tests.support.browser import chromium, console_errors, wait_until
from tests.support.stack import RunningStack, start_stack


def _stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory, mode: str) -> RunningStack:
    return start_stack(
        tmp_path_factory.mktemp(f"console-{mode}"),
        docker_env=docker_host.env(),
        extra_env={"AUTH_MODE": mode, "SWEEP_INTERVAL_SECONDS": "1", "RECONCILE_INTERVAL_SECONDS": "3600"},
    )


@pytest.fixture(scope="module")
def secret_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = _stack(docker_host, tmp_path_factory, "secret")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def test_iam_mode_says_the_console_needs_token_or_secret_mode(
    page: Any, docker_host: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stack = _stack(docker_host, tmp_path_factory, "iam")
    try:
        page.get(f"{stack.url}/console/")
        title = wait_until(page, lambda d: (t := d.find_element("id", "iam-title")).is_displayed() and t)
        said = page.find_element("id", "view-iam").text
    finally:
        stack.stop()

    assert title.text == "This API needs a signature a browser cannot make"
    assert "AUTH_MODE=token" in said and "AUTH_MODE=secret" in said
    assert not page.find_element("id", "view-login").is_displayed()
    assert console_errors(page) == []


def test_secret_mode_logs_in_with_the_shared_secret_and_acts_as_the_lease_s_owner(
    page: Any, secret_stack: RunningStack, docker_client: Any
) -> None:
    lease = secret_stack.acquire(owner_id="render-farm", ttl_seconds=600).json()["lease"]
    container = docker_client.containers.get(lease["provider_token"])
    container.exec_run(["sh", "-c", "echo 'frame 12 done' > /proc/1/fd/1"])
    page.get(f"{secret_stack.url}/console/")
    label = wait_until(page, lambda d: (t := d.find_element("id", "token-label")).text and t)
    assert label.text == "Shared secret"
    page.find_element("name", "token").send_keys(secret_stack.secret + "\n")
    wait_until(page, lambda d: lease["lease_id"] in rows(d), what="the lease")
    assert page.find_element("id", "session-who").text == "shared secret"

    open_console(page, secret_stack.url, secret_stack.secret, f"#/lease/{lease['lease_id']}/logs")
    wait_until(page, lambda d: "frame 12 done" in d.find_element("id", "logs-text").text, what="the owner's logs")
    page.find_element("css selector", "[data-action='release']").click()
    page.find_element("id", "confirm-release").click()

    wait_until(page, lambda d: "Released lease" in d.find_element("id", "notice").text, what="the release")
    assert secret_stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]["status"] == "released"
    assert console_errors(page) == []
