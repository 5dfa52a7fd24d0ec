"""Each view at 1280×800, from a local stack of its own (`make run`: nothing another test added) with leases from
three owners on both providers, one queued and one under a preemption notice, and how long the first view takes to
show data.

The screenshots go to the test's own folder; with CONSOLE_SCREENSHOTS=<folder> (the closing note's: docs/console)
there, with the timings beside them in first-view.json.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import World, console_world, open_console, rows, show_view
from tests.support.browser import console_errors, wait_until
from tests.support.console_seed import OWNERS
from tests.support.stack import REPO

LOADS = 7


@pytest.fixture(scope="module")
def shots(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with console_world(docker_host, tmp_path_factory.mktemp("console-shots")) as made:
        yield made


def _folder(tmp_path: Path) -> Path:
    chosen = os.environ.get("CONSOLE_SCREENSHOTS")
    folder = (REPO / chosen) if chosen else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def _first_data_ms(driver: Any) -> float:
    """Milliseconds from the navigation's start to the first view's data on screen (the page's own mark)."""
    script = "const m = performance.getEntriesByName('console:first-data'); return m.length ? m[0].startTime : null"
    return float(wait_until(driver, lambda d: d.execute_script(script), what="the first data"))


def _log_in(driver: Any, token: str, leases: int) -> float:
    """Log in with the form; answers the milliseconds from its submit to the live leases on screen."""
    driver.find_element("name", "token").send_keys(token + "\n")
    wait_until(driver, lambda d: len(rows(d)) >= leases, what="the seeded leases")
    return float(
        driver.execute_script(
            "return performance.getEntriesByName('console:first-data')[0].startTime"
            " - performance.getEntriesByName('console:login')[0].startTime"
        )
    )


def test_every_view_at_1280_by_800_and_the_time_to_the_first_data(
    driver: Any, shots: World, docker_client: Any, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    proxy, admin_token, fleet = shots.proxy, shots.admin_token, shots.fleet
    shown = fleet.of(OWNERS[0], "local-docker")
    lines = "; ".join(f"echo 'frame {n:03d}/240 rendered in 0.{40 + n % 9}s'" for n in range(1, 25))
    docker_client.containers.get(shown["provider_token"]).exec_run(["sh", "-c", f"({lines}) > /proc/1/fd/1"])

    driver.get(f"{proxy.url}/console/")
    wait_until(driver, lambda d: d.find_element("name", "token").is_displayed())
    driver.save_screenshot(str(folder / "login.png"))
    shown_leases = len(fleet.live) + 1  # and the queued one
    cold_login_ms = _log_in(driver, admin_token, shown_leases)  # the stack's first GET /v1/leases and /v1/callers
    driver.save_screenshot(str(folder / "leases.png"))

    show_view(driver, proxy, f"#/lease/{shown['lease_id']}")
    wait_until(driver, lambda d: "frame 024/240" in d.find_element("id", "logs-text").text, what="the logs")
    wait_until(driver, lambda d: d.find_elements("css selector", "#lease-history li"), what="the history")
    driver.save_screenshot(str(folder / "lease.png"))
    show_view(driver, proxy, "#/queue")
    wait_until(driver, lambda d: rows(d, "queue-rows") and rows(d, "preempt-rows"), what="the queued and noticed")
    driver.save_screenshot(str(folder / "queue.png"))
    show_view(driver, proxy, "#/spend")
    driver.save_screenshot(str(folder / "spend.png"))
    assert console_errors(driver) == []

    loads = []
    for _ in range(LOADS):
        open_console(driver, proxy.url, admin_token)
        loads.append(_first_data_ms(driver))
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{proxy.url}/console/")
    wait_until(driver, lambda d: d.find_element("name", "token").is_displayed())
    warm_login_ms = _log_in(driver, admin_token, shown_leases)
    timings = {
        "what": "ms from the page's navigation start to the first view's data on screen (performance mark)",
        "page_load_to_live_leases_ms": {
            "median": round(statistics.median(loads), 1),
            "runs": [round(x) for x in loads],
        },
        "login_submit_to_live_leases_ms": {
            "first_on_a_fresh_stack": round(cold_login_ms, 1),
            "again_once_its_functions_are_warm": round(warm_login_ms, 1),
        },
        "leases_shown": len(rows(driver)),
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    (folder / "first-view.json").write_text(json.dumps(timings, indent=2) + "\n")
    print(f"\nconsole first view: {json.dumps(timings)}")

    for view in ("login", "leases", "lease", "queue", "spend"):
        assert _png_size(folder / f"{view}.png") == (1280, 800), view
    assert timings["page_load_to_live_leases_ms"]["median"] < 5000


@pytest.fixture(autouse=True)
def _wide(driver: Any) -> None:
    """Screenshots are of the viewport: 1280×800 CSS pixels at a device scale of 1."""
    assert driver.execute_script("return [innerWidth, innerHeight, devicePixelRatio]") == [1280, 800, 1]
