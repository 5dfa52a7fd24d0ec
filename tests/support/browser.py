"""A real browser for the console's tests: Debian's Chromium, headless, driven by Selenium through Debian's
chromium-driver. Selenium Manager is never asked for anything (the driver and the browser are given by path, and
SE_OFFLINE is set), so nothing is downloaded; the browser is kept off every network but loopback."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# As the platform notes say Chromium needs, headless as root, and talking to no Google host.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    # Any name but loopback resolves to nothing: a request to another origin fails instead of leaving the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
T = TypeVar("T")


def require_browser() -> None:
    """Skip without Chromium and its driver locally; in CI (CI=true) a missing browser is a failure, never a skip."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if not missing:
        return
    message = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver (.ci/run installs them)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium(width: int = 1280, height: int = 800) -> Iterator[Any]:
    """A headless Chromium session whose viewport is `width`×`height` CSS pixels, logging the console and the
    network (`driver.get_log("browser")`, `get_log("performance")`)."""
    require_browser()
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="console-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        resize(driver, width, height)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def resize(driver: Any, width: int, height: int) -> None:
    """The viewport (not the window) at exactly `width`×`height`; a narrow one as a phone shows it."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def wait_until(driver: Any, condition: Callable[[Any], T], timeout: float = 15.0, what: str = "the page") -> T:
    """`condition(driver)` once it is truthy; a timeout names `what` and shows the page's text."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition(driver)
        except Exception:  # an element between two renders, a stale reference: look again
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            body = driver.execute_script("return document.body.innerText")
            raise AssertionError(f"timed out waiting for {what}; the page says:\n{body[:3000]}")
        time.sleep(0.1)


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """What the page logged at SEVERE since the last call (script errors, failed loads, CSP violations)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser asked for since the last call (the DevTools protocol's Network.requestWillBeSent: a
    request that failed, or went to another origin, is in it too)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
