"""The console's views in a real browser, through the local stack, against what the API answers: the login, the live
leases, one lease (every field, its history, its logs, its release), the queue and the spend."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from selenium.webdriver.support.select import Select

from tests.browser.conftest import CREDENTIAL_KEY, caller_token, cells, open_console, rows
from tests.fakes.runpod import FakeRunPod
from tests.support.browser import console_errors, wait_until
from tests.support.console_proxy import ConsoleProxy, ProxyControls
from tests.support.console_seed import OWNERS, QUEUED_PRIORITY, VICTIM_PRIORITY, Fleet, acquire, bearer
from tests.support.stack import RunningStack


def api(proxy: ConsoleProxy, path: str, token: str, **params: Any) -> Any:
    """What the console's own requests get: the API through the proxy."""
    answer = requests.get(proxy.url + path, headers={"Authorization": f"Bearer {token}"}, params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def text_of(driver: Any, element_id: str) -> str:
    return str(driver.find_element("id", element_id).text)


# --- logging in ----------------------------------------------------------------------------------------


def test_the_login_form_takes_a_token_and_keeps_it_in_this_tabs_session_only(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    # A token of its own: the bootstrap operator's is in make run's files, this one only in the browser from here.
    token = caller_token(console_stack, admin_token, "ops-login", "operator", [])
    driver.get(f"{proxy.url}/console/")
    field = wait_until(driver, lambda d: d.find_element("css selector", "form#login-form input[name='token']"))
    assert field.get_attribute("type") == "password"
    field.send_keys(token)
    driver.find_element("id", "login-submit").click()

    wait_until(driver, lambda d: rows(d), what="the leases table")
    storage = driver.execute_script(
        "return [sessionStorage.getItem(arguments[0]), localStorage.length, document.cookie, location.href]",
        CREDENTIAL_KEY,
    )
    assert storage[0] == token
    assert storage[1:3] == [0, ""]
    assert token not in storage[3]
    assert all(token not in path for path in proxy.paths)
    assert all(token not in entry["message"] for entry in driver.get_log("browser"))
    assert token not in console_stack.log_path.read_text(errors="replace")  # every line make run printed


def test_a_credential_revoked_while_the_console_is_open_returns_to_the_login_in_words(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    token = caller_token(console_stack, admin_token, "ops-revoked", "operator", [])
    open_console(driver, proxy.url, token)
    wait_until(driver, lambda d: rows(d), what="the leases")

    assert bearer(console_stack, "DELETE", "/v1/callers/ops-revoked", admin_token).status_code == 204
    message = wait_until(driver, lambda d: text_of(d, "login-error"), timeout=20, what="the login, saying why")
    assert message.startswith("The API no longer accepts this credential (401")
    assert driver.execute_script("return sessionStorage.length") == 0
    assert driver.find_element("name", "token").is_displayed()


def test_a_token_the_api_refuses_is_said_in_words_and_not_kept(driver: Any, proxy: ConsoleProxy, fleet: Fleet) -> None:
    driver.get(f"{proxy.url}/console/")
    wait_until(driver, lambda d: d.find_element("name", "token")).send_keys("oas_not-a-token\n")

    message = wait_until(driver, lambda d: text_of(d, "login-error"), what="the refusal")
    assert message.startswith("The API refused this caller token (401")
    assert driver.execute_script("return sessionStorage.length") == 0


# --- the live leases -----------------------------------------------------------------------------------


def test_the_leases_table_shows_what_get_v1_leases_answers(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token)
    listed = {lease["lease_id"]: lease for lease in api(proxy, "/v1/leases", admin_token, limit=1000)["leases"]}
    shown = wait_until(driver, lambda d: (found := rows(d)) and set(found) == set(listed) and found, what="every lease")

    assert {lease["owner_id"] for lease in listed.values()} >= set(OWNERS)
    assert {lease["provider"] for lease in listed.values()} == {"local-docker", "runpod"}
    assert any(lease["endpoint"] for lease in listed.values())  # a Host read from an endpoint
    for lease_id, lease in listed.items():
        row = cells(shown[lease_id])
        assert row["Status"].split()[0] == lease["status"]
        assert (row["Owner"], row["Kind"], row["GPU"], row["Provider"]) == (
            lease["owner_id"],
            lease["kind"],
            lease["gpu"],
            lease["provider"],
        )
        assert row["Worker"] == lease["worker_state"]
        assert row["Host"] == _host(lease)
        assert row["$/h"] == (f"${lease['cost_per_hour']:.3f}/h" if lease["cost_per_hour"] is not None else "—")


def _host(lease: dict[str, Any]) -> str:
    """Where the worker runs: a fleet's Docker host, else its endpoint's host, else its region."""
    token, endpoint = lease["provider_token"] or "", lease["endpoint"]
    if "/" in token:
        return str(token.split("/", 1)[0])
    return urlsplit(endpoint).netloc if endpoint else lease["region"] or "—"


def test_the_table_takes_a_new_lease_in_without_reloading_the_page(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token)
    wait_until(driver, lambda d: rows(d), what="the leases")
    driver.execute_script("window.__sameDocument = true")

    lease = acquire(console_stack, admin_token, owner_id=OWNERS[1], ttl_seconds=300)
    wait_until(driver, lambda d: lease["lease_id"] in rows(d), timeout=12, what="the new lease's row")

    assert driver.execute_script("return window.__sameDocument") is True
    bearer(console_stack, "DELETE", f"/v1/lease/{lease['lease_id']}", admin_token)


def test_the_filters_narrow_the_table_by_owner_provider_and_status(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    open_console(driver, proxy.url, admin_token)
    wait_until(driver, lambda d: rows(d), what="the leases")
    form = driver.find_element("id", "leases-filters")
    form.find_element("name", "owner_id").send_keys(OWNERS[2])
    Select(form.find_element("name", "provider")).select_by_value("runpod")
    form.find_element("css selector", "button[type='submit']").click()

    expected = {fleet.of(OWNERS[2], "runpod")["lease_id"]}
    wait_until(driver, lambda d: set(rows(d)) == expected, what="research's RunPod lease alone")
    Select(form.find_element("name", "status")).select_by_value("releasing")
    wait_until(driver, lambda d: not rows(d) and d.find_element("id", "leases-empty").is_displayed())


# --- one lease -----------------------------------------------------------------------------------------


def test_a_lease_shows_every_field_the_api_gives_it(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    lease = fleet.of(OWNERS[1], "local-docker")
    open_console(driver, proxy.url, admin_token)
    wait_until(driver, lambda d: rows(d)[lease["lease_id"]]).find_element("css selector", "td a").click()

    wait_until(driver, lambda d: d.find_elements("css selector", "#lease-fields dd"), what="the fields")
    read = api(proxy, f"/v1/lease/{lease['lease_id']}", admin_token)["lease"]
    shown = {dd.get_attribute("data-field"): dd.text for dd in driver.find_elements("css selector", "#lease-fields dd")}
    assert set(shown) == set(read)
    assert shown["owner_id"] == OWNERS[1] and shown["provider_token"] == read["provider_token"]
    assert shown["created_by"] == "admin"


def test_one_click_from_a_lease_to_its_logs_which_follow_the_worker(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet, docker_client: Any
) -> None:
    lease = fleet.of(OWNERS[0], "local-docker")
    container = docker_client.containers.get(lease["provider_token"])
    container.exec_run(["sh", "-c", "echo 'rendering frame 1 of 3' > /proc/1/fd/1"])
    open_console(driver, proxy.url, admin_token)
    wait_until(driver, lambda d: rows(d)[lease["lease_id"]]).find_element(
        "css selector", "td[data-label='Logs'] a"
    ).click()

    wait_until(driver, lambda d: "rendering frame 1 of 3" in text_of(d, "logs-text"), what="the logs")
    assert driver.execute_script("return document.activeElement.id") == "logs"
    container.exec_run(["sh", "-c", "echo 'rendering frame 2 of 3' > /proc/1/fd/1"])
    wait_until(driver, lambda d: "rendering frame 2 of 3" in text_of(d, "logs-text"), what="the next line, followed")
    assert text_of(driver, "logs-text").count("rendering frame 1 of 3") == 1


def test_a_runpod_lease_shows_its_pods_logs(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet, runpod: FakeRunPod
) -> None:
    lease = fleet.of(OWNERS[2], "runpod")
    runpod.append_pod_log(lease["provider_token"], "loading model weights", "serving on :8080")
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease['lease_id']}/logs")
    wait_until(driver, lambda d: "serving on :8080" in text_of(d, "logs-text"), what="the pod's logs")


def _history(driver: Any) -> list[tuple[str, str]]:
    items = driver.find_elements("css selector", "#lease-history li")
    return [
        (item.get_attribute("data-event-type"), item.find_element("class name", "event-actor").text) for item in items
    ]


def _check_history(driver: Any, proxy: ConsoleProxy, admin_token: str, lease_id: str) -> None:
    events = api(proxy, f"/v1/lease/{lease_id}/events", admin_token)["events"]
    expected = [(event["type"], f"by {event['data']['actor']}") for event in events]
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease_id}")
    assert wait_until(driver, lambda d: (shown := _history(d)) == expected and shown, what="the history")


def test_an_ended_lease_shows_its_history_with_who_ended_it(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    lease_id = fleet.ended[0]["lease_id"]
    _check_history(driver, proxy, admin_token, lease_id)
    assert _history(driver)[0] == ("lease.active", "by admin")
    assert _history(driver)[-1] == ("lease.released", "by admin")


def test_a_live_lease_s_history_takes_its_next_event_in_without_reloading_the_page(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    lease = acquire(console_stack, admin_token, owner_id=OWNERS[1], ttl_seconds=600)
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease['lease_id']}")
    wait_until(driver, lambda d: ("lease.active", "by admin") in _history(d), what="the lease's start")
    driver.execute_script("window.__sameDocument = true")

    assert bearer(console_stack, "DELETE", f"/v1/lease/{lease['lease_id']}", admin_token).status_code == 204
    wait_until(
        driver, lambda d: _history(d)[-1] == ("lease.released", "by admin"), timeout=20, what="the release, appended"
    )
    assert driver.execute_script("return window.__sameDocument") is True


def test_an_operator_releases_a_lease_after_confirming(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, docker_client: Any, fleet: Fleet
) -> None:
    lease = acquire(console_stack, admin_token, owner_id=OWNERS[2], ttl_seconds=600)
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease['lease_id']}")
    button = wait_until(
        driver, lambda d: (b := d.find_element("css selector", "[data-action='release']")).is_displayed() and b
    )

    button.click()
    driver.find_element("id", "confirm-cancel").click()
    time.sleep(0.5)
    assert api(proxy, f"/v1/lease/{lease['lease_id']}", admin_token)["lease"]["status"] == "active"
    button.click()
    assert lease["lease_id"] in text_of(driver, "confirm-text")
    driver.find_element("id", "confirm-release").click()

    wait_until(driver, lambda d: "Released lease" in text_of(d, "notice"), what="the release said")
    assert api(proxy, f"/v1/lease/{lease['lease_id']}", admin_token)["lease"]["status"] == "released"
    assert not docker_client.containers.list(all=True, filters={"id": lease["provider_token"]})
    wait_until(driver, lambda d: not d.find_element("css selector", "[data-action='release']").is_displayed())


@pytest.fixture
def slow_deletes(controls: ProxyControls) -> Iterator[None]:
    """Each DELETE's answer reaches the browser 3 s after the stack acted on it: longer than a logs read's period."""
    controls.slow_deletes = 3.0
    yield
    controls.slow_deletes = 0.0


@pytest.mark.usefixtures("slow_deletes")
def test_a_release_from_the_logs_stops_following_them_before_the_worker_goes(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    lease = acquire(console_stack, admin_token, owner_id=OWNERS[0], ttl_seconds=600)
    open_console(driver, proxy.url, admin_token, f"#/lease/{lease['lease_id']}/logs")
    wait_until(driver, lambda d: "following" in text_of(d, "logs-status"), what="the logs followed")
    driver.find_element("css selector", "[data-action='release']").click()
    driver.find_element("id", "confirm-release").click()

    wait_until(driver, lambda d: "Released lease" in text_of(d, "notice"), what="the release said")
    time.sleep(2.5)  # a logs read's period more: one still scheduled would have gone by now
    assert console_errors(driver) == []  # no read answered 410 (Gone) while, or after, the worker went
    said = wait_until(driver, lambda d: "not following" in (t := text_of(d, "logs-status")) and t, what="the end")
    assert said.endswith("not following: the lease is released, its worker gone")


# --- the queue -----------------------------------------------------------------------------------------


def test_the_queue_in_admission_order_and_the_lease_under_a_notice_with_its_time_left(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    queue = api(proxy, "/v1/queue", admin_token)["queue"]
    noticed = [lease for lease in api(proxy, "/v1/leases", admin_token, limit=1000)["leases"] if lease["preempt_at"]]
    assert [lease["lease_id"] for lease in queue] == [fleet.queued["lease_id"]]
    assert [lease["lease_id"] for lease in noticed] == [fleet.noticed["lease_id"]]
    open_console(driver, proxy.url, admin_token, "#/queue")
    expected = [lease["lease_id"] for lease in queue]
    wait_until(driver, lambda d: list(rows(d, "queue-rows")) == expected, what="the queue in admission order")

    for lease in queue:
        row = cells(rows(driver, "queue-rows")[lease["lease_id"]])
        assert (row["Position"], row["Priority"], row["Owner"], row["Kind"], row["GPU"]) == (
            str(lease["queue_position"]),
            str(lease["priority"]),
            lease["owner_id"],
            lease["kind"],
            lease["gpu"],
        )
        assert row["Waits for"] == lease["queue_reason"] and lease["queue_reason"]
    (victim,) = noticed
    row = cells(wait_until(driver, lambda d: rows(d, "preempt-rows").get(victim["lease_id"]), what="the notice"))
    assert (row["Owner"], row["Priority"], row["For priority"], row["Provider"], row["Ends"]) == (
        OWNERS[0],
        str(VICTIM_PRIORITY),
        str(QUEUED_PRIORITY),
        "runpod",
        victim["preempt_at"],
    )
    assert row["Time left"] not in ("—", "past")


def test_a_lease_under_a_notice_shows_when_and_for_what_priority(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    victim = fleet.noticed
    open_console(driver, proxy.url, admin_token)
    row = wait_until(driver, lambda d: rows(d).get(victim["lease_id"]), what="the noticed lease's row")
    assert cells(row)["Status"] == "active notice"
    open_console(driver, proxy.url, admin_token, f"#/lease/{victim['lease_id']}")
    wait_until(driver, lambda d: d.find_elements("css selector", "#lease-fields dd"), what="the fields")
    shown = {dd.get_attribute("data-field"): dd.text for dd in driver.find_elements("css selector", "#lease-fields dd")}
    assert shown["preempt_at"].startswith(victim["preempt_at"] + " (in ")
    assert (shown["preempt_priority"], shown["priority"], shown["preemptible"]) == (
        str(QUEUED_PRIORITY),
        str(VICTIM_PRIORITY),
        "true",
    )


# --- spend ---------------------------------------------------------------------------------------------


def test_the_spend_chart_has_one_bar_per_owner_and_day_and_the_totals_beside_it(
    driver: Any, proxy: ConsoleProxy, admin_token: str, fleet: Fleet
) -> None:
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=back)).isoformat() for back in range(29, -1, -1)]
    expected: dict[tuple[str, str], float] = {}
    for day in days:
        for row in api(proxy, "/v1/usage", admin_token, since=day, until=day, group_by="owner")["usage"]:
            expected[(row["owner_id"], day)] = row["cost_usd"]
    open_console(driver, proxy.url, admin_token, "#/spend")

    bars = wait_until(driver, lambda d: d.find_elements("css selector", "#spend-chart svg rect.bar"), what="bars")
    shown = {
        (bar.get_attribute("data-owner"), bar.get_attribute("data-day")): float(bar.get_attribute("data-cost"))
        for bar in bars
    }
    assert len(bars) == len(shown) == len(expected)
    assert shown == pytest.approx(expected)
    # Today's: the seeded leases released at once (and any another test released: the stack is shared).
    assert {owner for owner, day in expected if day == days[-1]} >= set(OWNERS)
    totals = {row.get_attribute("data-owner"): row for row in driver.find_elements("css selector", "#spend-rows tr")}
    assert set(totals) == {owner for owner, _ in expected}
    for owner in totals:
        cost = sum(value for (who, _), value in expected.items() if who == owner)
        assert totals[owner].find_elements("css selector", "td")[-1].text == _usd(cost)


def _usd(cost: float) -> str:
    """As the console writes an amount: cents, or four decimals below a dollar (a short lease's cost)."""
    return f"${cost:.2f}" if cost == 0 or abs(cost) >= 1 else f"${cost:.4f}"


def test_an_owner_id_of_128_characters_wraps_in_the_totals_which_keep_their_width(
    driver: Any, proxy: ConsoleProxy, console_stack: RunningStack, admin_token: str, fleet: Fleet
) -> None:
    owner = "render-farm-" + "x" * 116
    gone = acquire(console_stack, admin_token, owner_id=owner, ttl_seconds=60)
    assert bearer(console_stack, "DELETE", f"/v1/lease/{gone['lease_id']}", admin_token).status_code == 204
    open_console(driver, proxy.url, admin_token, "#/spend")

    row = wait_until(driver, lambda d: d.find_element("css selector", f"#spend-rows tr[data-owner='{owner}']"))
    assert row.find_element("css selector", "th").text.replace("\n", "") == owner
    wrap = driver.find_element("css selector", "#spend-table").find_element("xpath", "..")
    assert driver.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", wrap)
