"""The console in a real browser through the local stack (`make run`): AUTH_MODE=token, local-docker and the RunPod
fake as providers (RunPod capped: one lease queued, one under a preemption notice), leases from three owners on both,
and a proxy in front (tests/support/console_proxy.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.browser import chromium, require_browser, resize, wait_until
from tests.support.console_proxy import ConsoleProxy, ProxyControls
from tests.support.console_seed import QUEUE_ENV, Fleet, bearer, seed_fleet, seed_usage_history
from tests.support.stack import RunningStack, start_stack

CREDENTIAL_KEY = "openalice-console-credential"
RTX, H100 = "NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3"


@dataclass
class World:
    """A local stack (`make run`) with its RunPod fake, seeded, and the proxy the browser opens."""

    runpod: FakeRunPod
    stack: RunningStack
    admin_token: str
    fleet: Fleet
    controls: ProxyControls
    proxy: ConsoleProxy


def runpod_env(fake: FakeRunPod) -> dict[str, str]:
    return {
        "PROVIDERS": "local-docker,runpod",
        "RUNPOD_API_URL": fake.url,
        "RUNPOD_API_KEY": "console-key",
        "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
        "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
        "RUNPOD_GPU_TYPES_ENTRY": RTX,
        "RUNPOD_GPU_TYPES_HIGH": H100,
        "LOCAL_DOCKER_COST_PER_HOUR": "0.4",
        "SWEEP_INTERVAL_SECONDS": "1",
        "RECONCILE_INTERVAL_SECONDS": "3600",
    }


@contextmanager
def console_world(docker_host: Any, folder: Path) -> Iterator[World]:
    require_browser()  # before the stack: nothing to start when the browser is missing
    with start_fake_runpod("console-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as runpod:
        stack = start_stack(
            folder,
            docker_env=docker_host.env(),
            extra_env={**runpod_env(runpod), **QUEUE_ENV, "AUTH_MODE": "token", "AUTH_CACHE_SECONDS": "1"},
        )
        try:
            admin = (stack.state_dir / "admin-token").read_text().strip()
            fleet = seed_fleet(stack, admin)
            seed_usage_history(stack)
            controls = ProxyControls()
            proxy = ConsoleProxy(stack.url, controls).start()
            try:
                yield World(runpod, stack, admin, fleet, controls, proxy)
            finally:
                proxy.stop()
        finally:
            stack.stop()


@pytest.fixture(scope="package")
def world(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The views' tests share one: each leaves the seeded fleet as it found it, or adds to it only."""
    with console_world(docker_host, tmp_path_factory.mktemp("console-stack")) as made:
        yield made


@pytest.fixture(scope="package")
def runpod(world: World) -> FakeRunPod:
    return world.runpod


@pytest.fixture(scope="package")
def console_stack(world: World) -> RunningStack:
    return world.stack


@pytest.fixture(scope="package")
def admin_token(world: World) -> str:
    return world.admin_token


@pytest.fixture(scope="package")
def fleet(world: World) -> Fleet:
    return world.fleet


@pytest.fixture(scope="package")
def controls(world: World) -> ProxyControls:
    return world.controls


@pytest.fixture(scope="package")
def proxy(world: World) -> ConsoleProxy:
    return world.proxy


def caller_token(stack: RunningStack, admin: str, name: str, role: str, owners: list[str]) -> str:
    body = {"name": name, "owners": owners, "role": role}
    answer = bearer(stack, "POST", "/v1/callers", admin, json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["token"])


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def driver(browser: Any) -> Iterator[Any]:
    """The package's browser at 1280×800, its logs emptied, this tab's session forgotten after the test."""
    resize(browser, 1280, 800)
    browser.get_log("browser")
    browser.get_log("performance")
    yield browser
    browser.execute_script("try { sessionStorage.clear() } catch (e) {}")
    browser.get("about:blank")  # no page left polling the stack


def open_console(driver: Any, base: str, token: str, view: str = "#/leases") -> None:
    """The console at `view`, logged in as `token` (put where the login form puts it: this tab's sessionStorage)."""
    driver.get(f"{base}/console/")
    wait_until(driver, lambda d: d.execute_script("return document.readyState") == "complete")
    driver.execute_script("sessionStorage.setItem(arguments[0], arguments[1])", CREDENTIAL_KEY, token)
    driver.execute_script("history.replaceState(null, '', arguments[0]); location.reload()", view)
    wait_until(driver, lambda d: d.execute_script("return !document.getElementById('nav').hidden"), what="the views")


def rows(driver: Any, table: str = "leases-rows") -> dict[str, Any]:
    """The rows of a table, by lease id."""
    found = driver.find_elements("css selector", f"#{table} tr[data-lease-id]")
    return {row.get_attribute("data-lease-id"): row for row in found}


def cells(row: Any) -> dict[str, str]:
    """A row's cells by column label."""
    return {cell.get_attribute("data-label"): cell.text for cell in row.find_elements("css selector", "td")}


# What each view shows once its data is in.
VIEW_READY = {"#/leases": "#leases-rows tr", "#/queue": "#queue-rows tr", "#/spend": "#spend-chart rect.bar"}


def show_view(driver: Any, proxy: ConsoleProxy, view: str) -> None:
    """Go to `view` in the page already open (no reload) and wait for its data."""
    driver.get(f"{proxy.url}/console/{view}")
    ready = VIEW_READY.get(view, "#lease-fields dd")
    wait_until(driver, lambda d: d.find_elements("css selector", ready), what=f"{view} with its data")
