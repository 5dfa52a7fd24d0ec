"""The console in a real browser through the local stack (`make run`): AUTH_MODE=token, local-docker and the RunPod
fake as providers, leases from three owners on both, and the stand-in proxy in front (tests/support/console_proxy.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.browser import chromium, require_browser, resize, wait_until
from tests.support.console_proxy import ConsoleProxy, StandIns
from tests.support.console_seed import Fleet, bearer, seed_fleet, seed_usage_history, stand_ins_for
from tests.support.stack import RunningStack, start_stack

CREDENTIAL_KEY = "openalice-console-credential"
RTX, H100 = "NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def runpod() -> Iterator[FakeRunPod]:
    with start_fake_runpod("console-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        yield server


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


@pytest.fixture(scope="module")
def console_stack(
    docker_host: Any, runpod: FakeRunPod, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    require_browser()  # before the stack: nothing to start when the browser is missing
    running = start_stack(
        tmp_path_factory.mktemp("console-stack"),
        docker_env=docker_host.env(),
        extra_env={**runpod_env(runpod), "AUTH_MODE": "token", "AUTH_CACHE_SECONDS": "1"},
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def admin_token(console_stack: RunningStack) -> str:
    return (console_stack.state_dir / "admin-token").read_text().strip()


def caller_token(stack: RunningStack, admin: str, name: str, role: str, owners: list[str]) -> str:
    body = {"name": name, "owners": owners, "role": role}
    answer = bearer(stack, "POST", "/v1/callers", admin, json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["token"])


@pytest.fixture(scope="module")
def fleet(console_stack: RunningStack, admin_token: str) -> Fleet:
    seeded = seed_fleet(console_stack, admin_token)
    seed_usage_history(console_stack)
    return seeded


@pytest.fixture(scope="module")
def stand_ins(fleet: Fleet) -> StandIns:
    return stand_ins_for(fleet)


@pytest.fixture(scope="module")
def proxy(console_stack: RunningStack, stand_ins: StandIns) -> Iterator[ConsoleProxy]:
    server = ConsoleProxy(console_stack.url, stand_ins).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def driver(browser: Any, stand_ins: StandIns) -> Iterator[Any]:
    """The module's browser at 1280×800, its logs emptied, this tab's session forgotten after the test."""
    resize(browser, 1280, 800)
    browser.get_log("browser")
    browser.get_log("performance")
    yield browser
    stand_ins.hide_routes = False
    browser.execute_script("try { sessionStorage.clear() } catch (e) {}")
    browser.get("about:blank")  # no page left polling the stack


def open_console(driver: Any, proxy: ConsoleProxy, token: str, view: str = "#/leases") -> None:
    """The console at `view`, logged in as `token` (put where the login form puts it: this tab's sessionStorage)."""
    driver.get(f"{proxy.url}/console/")
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
