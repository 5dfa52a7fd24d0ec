"""The console is safe and usable by construction, in a real browser through the local stack: its files' headers,
markup in the API's values left inert, no console error and no request to another origin across every view, views
a credential may not read saying so, routes the API lacks saying "not available", a 390 px wide phone, the keyboard.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import caller_token, cells, open_console, rows, show_view
from tests.support.browser import console_errors, origin, requested_urls, resize, wait_until
from tests.support.console_proxy import ConsoleProxy, ProxyControls
from tests.support.console_seed import MARKUP, OWNERS, Fleet
from tests.support.stack import RunningStack

ASSETS = ("", "index.html", "main.js", "api.js", "dom.js", "leases.js", "lease.js", "logs.js", "queue.js", "spend.js")
ASSETS += ("chart.js", "console.css", "favicon.svg", "config.json")
VIEWS = ("#/leases", "#/queue", "#/spend")


def test_every_console_file_carries_the_strict_headers_through_make_run(console_stack: RunningStack) -> None:
    for asset in ASSETS:
        answer = requests.get(f"{console_stack.url}/console/{asset}", timeout=10)
        assert answer.status_code == 200, asset
        policy = answer.headers["Content-Security-Policy"]
        assert policy.startswith("default-src 'self';") and "frame-ancestors 'none'" in policy, asset
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert requests.get(f"{console_stack.url}/console/config.json", timeout=10).json() == {"auth_mode": "token"}


def test_the_console_without_its_final_slash_redirects_to_it(console_stack: RunningStack) -> None:
    answer = requests.get(f"{console_stack.url}/console", timeout=10)
    assert answer.url == f"{console_stack.url}/console/"
    assert answer.history[0].status_code == 302 and answer.headers["Content-Type"].startswith("text/html")


def test_markup_in_a_correlation_id_or_an_owner_id_shows_as_text_and_never_runs(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet, console_stack: RunningStack
) -> None:
    from tests.support.console_seed import acquire, bearer

    owned = acquire(console_stack, admin_token, owner_id="<b>bold</b><svg onload=window.__xss=3>", ttl_seconds=300)
    open_console(driver, proxy.url, admin_token)
    row = wait_until(driver, lambda d: rows(d).get(owned["lease_id"]), what="the lease with markup in its owner")
    assert row.find_element("css selector", "td[data-label='Owner']").text == owned["owner_id"]
    open_console(driver, proxy.url, admin_token, f"#/lease/{fleet.marked['lease_id']}")
    shown = wait_until(driver, lambda d: d.find_element("css selector", "dd[data-field='correlation_id']").text)

    assert shown == MARKUP
    assert driver.execute_script("return window.__xss") is None
    assert driver.find_elements("css selector", "main img, main script, main b, main svg:not(.bars)") == []
    bearer(console_stack, "DELETE", f"/v1/lease/{owned['lease_id']}", admin_token)


def test_no_view_logs_an_error_or_asks_another_origin(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token)
    for view in (*VIEWS, f"#/lease/{fleet.of(OWNERS[1], 'runpod')['lease_id']}/logs"):
        show_view(driver, proxy, view)
    wait_until(driver, lambda d: "lines" in d.find_element("id", "logs-status").text, what="the logs")
    driver.find_element("id", "logout").click()

    assert console_errors(driver) == []
    urls = requested_urls(driver)
    assert urls and {origin(url) for url in urls} == {proxy.url}
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert {origin(url) for url in resources} <= {proxy.url}


def test_a_view_the_credential_may_not_read_says_so(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    token = caller_token(console_stack, admin_token, "anim-console", "service", [OWNERS[0]])
    open_console(driver, proxy.url, token)
    shown = wait_until(driver, lambda d: rows(d), what="its own leases")
    assert {cells(row)["Owner"] for row in shown.values()} == {OWNERS[0]}
    form = driver.find_element("id", "leases-filters")
    form.find_element("name", "owner_id").send_keys(OWNERS[1] + Keys.ENTER)

    message = wait_until(driver, lambda d: d.find_element("id", "leases-error").text, what="the refusal in words")
    assert message.startswith("This credential may not read the live leases (403 forbidden")


def test_a_viewer_is_shown_no_release_button(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    token = caller_token(console_stack, admin_token, "ops-viewer", "viewer", [OWNERS[0]])
    lease = fleet.of(OWNERS[1], "local-docker")
    open_console(driver, proxy.url, token, f"#/lease/{lease['lease_id']}")
    wait_until(driver, lambda d: d.find_elements("css selector", "#lease-fields dd"), what="the lease")
    assert not driver.find_element("css selector", "[data-action='release']").is_displayed()
    assert driver.find_element("id", "session-who").text == "token · read-only here"


@pytest.fixture
def hidden_routes(controls: ProxyControls) -> Iterator[None]:
    """The proxy answers GET /v1/queue and a lease's events with API Gateway's 404 (an older API), for one test."""
    controls.hide_routes = True
    yield
    controls.hide_routes = False


@pytest.mark.usefixtures("hidden_routes")
def test_routes_the_api_lacks_say_not_available(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token, "#/queue")
    message = wait_until(driver, lambda d: d.find_element("id", "queue-error").text, what="the queue's absence")
    assert message == "Not available: this API does not serve the queue yet."
    wait_until(driver, lambda d: rows(d, "preempt-rows"), what="the notices, read from the live leases")
    open_console(driver, proxy.url, admin_token, f"#/lease/{fleet.ended[2]['lease_id']}")
    history = wait_until(
        driver, lambda d: d.find_element("id", "history-status").text.startswith("Not available") and d
    )
    assert history.find_element("id", "history-status").text == (
        "Not available: this API does not serve this lease's history yet."
    )
    errors = console_errors(driver)
    assert all("404 (Not Found)" in entry["message"] for entry in errors), errors  # the absent routes only


def test_every_view_fits_a_390_px_wide_phone(driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet) -> None:
    resize(driver, 390, 844)
    driver.get(f"{proxy.url}/console/")
    wait_until(driver, lambda d: d.find_element("name", "token").is_displayed())
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
    open_console(driver, proxy.url, admin_token)
    for view in (*VIEWS, f"#/lease/{fleet.marked['lease_id']}/logs"):
        show_view(driver, proxy, view)
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390, f"{view} is {width} px wide"
    nav = driver.find_elements("css selector", "#nav a")
    assert all(link.is_displayed() and link.rect["x"] + link.rect["width"] <= 390 for link in nav)


def _tab(driver: Any) -> str:
    """Press Tab wherever the focus is; answers what has it now (a link's address, a control's name, an id)."""
    ActionChains(driver).send_keys(Keys.TAB).perform()
    return str(
        driver.execute_script(
            "const e = document.activeElement;"
            " return e.getAttribute('href') || e.getAttribute('name') || e.id || e.localName"
        )
    )


def test_the_keyboard_reaches_every_view_and_a_lease_s_logs(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token)
    wait_until(driver, lambda d: rows(d), what="the leases")
    driver.execute_script("document.activeElement.blur()")
    reached = [_tab(driver) for _ in range(40)]

    assert set(VIEWS) <= set(reached)
    assert {"owner_id", "provider", "status", "logout"} <= set(reached)
    logs = next(link for link in reached if link.endswith("/logs"))
    while _tab(driver) != logs:
        pass
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    wait_until(driver, lambda d: d.switch_to.active_element.get_attribute("id") == "logs", what="focus on the logs")


def test_a_refresh_of_the_table_keeps_the_keyboard_s_place(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    lease_id = fleet.of(OWNERS[2], "local-docker")["lease_id"]
    open_console(driver, proxy.url, admin_token)
    link = wait_until(driver, lambda d: rows(d)[lease_id]).find_element("css selector", "td[data-label='Logs'] a")
    driver.execute_script("arguments[0].focus()", link)
    before = driver.find_element("id", "leases-status").text

    wait_until(driver, lambda d: d.find_element("id", "leases-status").text != before, what="the next refresh")
    focused = (
        "const e = document.activeElement; return [e.closest('tr')?.dataset.leaseId, e.closest('td')?.dataset.label]"
    )
    assert driver.execute_script(focused) == [lease_id, "Logs"]


def test_the_keyboard_opens_the_release_confirmation_and_escape_keeps_the_lease(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    lease = fleet.of(OWNERS[1], "runpod")
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease['lease_id']}")
    release = wait_until(
        driver, lambda d: (b := d.find_element("css selector", "[data-action='release']")).is_displayed() and b
    )
    while driver.switch_to.active_element != release:
        driver.switch_to.active_element.send_keys(Keys.TAB)
    release.send_keys(Keys.ENTER)

    wait_until(driver, lambda d: d.find_element("id", "confirm").get_attribute("open") is not None, what="the dialog")
    assert driver.switch_to.active_element.get_attribute("id") == "confirm-cancel"
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    wait_until(driver, lambda d: d.switch_to.active_element == release, what="focus back on the release button")
    assert driver.find_element("id", "confirm").get_attribute("open") is None
    answer = requests.get(
        f"{proxy.url}/v1/lease/{lease['lease_id']}", headers={"Authorization": f"Bearer {admin_token}"}, timeout=10
    )
    assert answer.json()["lease"]["status"] == "active"
