"""The modal driver against the fake Modal API server, through Modal's own unmodified client: what it asks
Modal for, how it falls through GPU types, what each of Modal's refusals means, and nothing left running."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.deadline import Deadline
from scheduler.errors import ConfigurationError
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.base import (
    PriceAboveCeiling,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ReadinessState,
    WorkerGone,
    WorkerOutcomeUnknown,
)
from scheduler.providers.modal.driver import TIMEOUT_MARGIN_SECONDS, ModalProvider
from scheduler.providers.modal.session import ModalSession
from scheduler.request_models import LeaseRequest
from scheduler.worker_logs import LogQuery, parse_rfc3339_ns
from tests.fakes.modal import FakeModal, start_fake_modal, tunnel_host
from tests.unit.builders import new_lease

RENDERER, ANIM = "openalice/renderer:1", "openalice/anim:1"
PRICES = {"L4": 0.7992, "A100-80GB": 2.4984, "H100": 3.9492}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModal]:
    with start_fake_modal(known_images={RENDERER, ANIM}) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeModal) -> FakeModal:
    server.reset()
    return server


def make_driver(fake: FakeModal, url: str | None = None, **overrides: Any) -> ModalProvider:
    options: dict[str, Any] = {
        "images": {WorkerKind.RENDERER: RENDERER, WorkerKind.ANIM: ANIM},
        "gpu_types": {GpuClass.ENTRY: ("L4",), GpuClass.MID: ("A100-80GB", "H100"), GpuClass.HIGH: ("H100",)},
        "prices": PRICES,
        "regions": {"eu": ("eu",), "us-west": ("us-west",)},
        "create_seconds": 8.0,
        "call_seconds": 3.0,
        "release_confirm_seconds": 5.0,
        "settle_reserve_seconds": 1.5,
    }
    options.update(overrides)
    session = ModalSession(url or fake.url, lambda: fake.token, "openalice-workers")
    return ModalProvider(session, **options)


@pytest.fixture
def driver(fake: FakeModal) -> ModalProvider:
    return make_driver(fake)


def lease_for(gpu: GpuClass = GpuClass.HIGH, **changes: Any) -> Lease:
    now = datetime.now(UTC).replace(microsecond=0)
    return new_lease(provider="modal", gpu=gpu, created_at=now, **changes)


def live(fake: FakeModal) -> list[dict[str, Any]]:
    return fake.sandboxes(live_only=True)


def settled(fake: FakeModal, seconds: float = 2.0) -> list[dict[str, Any]]:
    """The live Sandboxes once terminations that are under way have finished."""
    fake.advance(seconds)
    return live(fake)


# --- what a Sandbox is made of ---------------------------------------------------------------------


def test_a_worker_is_a_sandbox_named_and_tagged_with_its_lease(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {"SCENE": "intro"})

    (sandbox,) = live(fake)
    assert sandbox["id"] == worker.token and sandbox["name"] == f"lease-{lease.lease_id}"
    assert sandbox["image"] == RENDERER and sandbox["gpu"] == "H100" and sandbox["ports"] == [8080]
    assert sandbox["tags"]["openalice_scheduler"] == "managed"
    assert sandbox["tags"]["openalice_lease_id"] == lease.lease_id
    assert sandbox["tags"]["openalice_kind"] == "renderer"
    assert sandbox["app_id"] == fake.app_id("openalice-workers")


def test_the_sandbox_gets_the_leases_env_with_its_id_and_expiry(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for()
    driver.provision(lease, {"SCENE": "intro"})
    (sandbox,) = live(fake)
    assert sandbox["env"]["SCENE"] == "intro"
    assert sandbox["env"]["LEASE_ID"] == lease.lease_id
    assert sandbox["env"]["LEASE_EXPIRES_AT"] == lease.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_sandbox_times_out_a_little_past_the_leases_expiry(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for(ttl_seconds=600)
    driver.provision(lease, {})
    (sandbox,) = live(fake)
    assert 600 + TIMEOUT_MARGIN_SECONDS - 5 <= sandbox["timeout_secs"] <= 600 + TIMEOUT_MARGIN_SECONDS


def test_modal_itself_ends_a_sandbox_at_its_timeout(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for(ttl_seconds=600)
    worker = driver.provision(lease, {})
    fake.advance(600 + TIMEOUT_MARGIN_SECONDS + 1)
    assert live(fake) == []
    said = driver.readiness(lease.lease_id, worker.token)
    assert said.state is ReadinessState.FAILED and "timed out" in said.detail


def test_the_worker_says_its_sandbox_ends_a_little_past_the_leases_expiry(
    driver: ModalProvider, fake: FakeModal
) -> None:
    lease = lease_for(ttl_seconds=600)
    worker = driver.provision(lease, {})
    assert worker.ends_at == lease.expires_at + timedelta(seconds=TIMEOUT_MARGIN_SECONDS)


def test_modal_ends_the_sandbox_no_sooner_than_the_worker_said(driver: ModalProvider, fake: FakeModal) -> None:
    worker = driver.provision(lease_for(ttl_seconds=600), {})
    assert worker.ends_at is not None
    until_end = (worker.ends_at - datetime.now(UTC)).total_seconds()
    fake.advance(until_end - 1)
    assert [sandbox["id"] for sandbox in live(fake)] == [worker.token]
    fake.advance(TIMEOUT_MARGIN_SECONDS)
    assert live(fake) == []


def test_the_endpoint_is_the_encrypted_tunnel_of_the_worker_port(driver: ModalProvider, fake: FakeModal) -> None:
    worker = driver.provision(lease_for(), {})
    assert worker.endpoint == f"https://{tunnel_host(worker.token, 8080)}"


def test_the_worker_costs_its_gpu_types_price(driver: ModalProvider, fake: FakeModal) -> None:
    worker = driver.provision(lease_for(GpuClass.ENTRY), {})
    assert worker.cost_per_hour == PRICES["L4"]


# --- GPU types, capacity, quota --------------------------------------------------------------------


def test_a_gpu_type_out_of_capacity_falls_through_to_the_next(fake: FakeModal) -> None:
    fake.configure(no_capacity_gpus={"A100-80GB"})
    driver = make_driver(fake)

    worker = driver.provision(lease_for(GpuClass.MID), {})

    assert worker.cost_per_hour == PRICES["H100"]
    (sandbox,) = settled(fake)
    assert sandbox["id"] == worker.token and sandbox["gpu"] == "H100"
    waited = [each for each in fake.sandboxes() if each["gpu"] == "A100-80GB"]
    assert len(waited) == 1 and waited[0]["status"] == "finished"  # the queued one was removed


def test_no_gpu_type_with_capacity_is_no_capacity_and_leaves_nothing(fake: FakeModal) -> None:
    fake.configure(no_capacity_gpus={"A100-80GB", "H100"})
    driver = make_driver(fake, create_seconds=5.0)
    started = time.monotonic()
    with pytest.raises(ProviderCapacityError, match="not started within"):
        driver.provision(lease_for(GpuClass.MID), {})
    assert time.monotonic() - started < 7.0
    assert settled(fake) == []


def test_a_slow_start_within_the_time_allowed_is_served(fake: FakeModal) -> None:
    fake.configure(schedule_seconds=1.0, tunnel_seconds=0.5)
    worker = make_driver(fake).provision(lease_for(), {})
    assert [sandbox["id"] for sandbox in live(fake)] == [worker.token]


def test_the_workspaces_quota_is_capacity_not_a_refusal(driver: ModalProvider, fake: FakeModal) -> None:
    fake.configure(quota_max_sandboxes=0)
    with pytest.raises(ProviderCapacityError, match="quota") as raised:
        driver.provision(lease_for(), {})
    assert not isinstance(raised.value, ProviderUnreachable)
    assert fake.sandboxes() == []


def test_a_throttled_call_is_retried_after_modals_retry_after(driver: ModalProvider, fake: FakeModal) -> None:
    fake.configure(throttle_next=2, throttle_retry_after=0.2)
    worker = driver.provision(lease_for(), {})
    assert [sandbox["id"] for sandbox in live(fake)] == [worker.token]


# --- refusals and outages --------------------------------------------------------------------------


def test_a_refused_token_is_a_failed_request_and_makes_nothing(driver: ModalProvider, fake: FakeModal) -> None:
    fake.configure(deny_token=True)
    with pytest.raises(ProviderRequestFailed, match="Invalid token"):
        driver.provision(lease_for(), {})
    assert fake.sandboxes() == []


def test_an_image_that_cannot_be_pulled_is_a_failed_request(fake: FakeModal) -> None:
    driver = make_driver(fake, images={WorkerKind.RENDERER: "openalice/never-pushed:1"})
    with pytest.raises(ProviderRequestFailed, match="Failed to pull image"):
        driver.provision(lease_for(), {})
    assert fake.sandboxes() == []


def test_modal_unreachable_is_capacity_within_the_callers_deadline(fake: FakeModal) -> None:
    driver = make_driver(fake, url="http://127.0.0.1:9", create_seconds=20.0)
    started = time.monotonic()
    with pytest.raises(ProviderUnreachable):
        driver.provision(lease_for(), {}, Deadline.within(2.0))
    assert time.monotonic() - started < 3.0


def test_a_create_that_never_answered_is_adopted_when_its_sandbox_runs(fake: FakeModal) -> None:
    fake.configure(hang_next_creates=1)
    driver = make_driver(fake, create_seconds=6.0)
    lease = lease_for()

    worker = driver.provision(lease, {})

    (sandbox,) = live(fake)
    assert sandbox["id"] == worker.token and sandbox["tags"]["openalice_lease_id"] == lease.lease_id
    assert worker.endpoint == f"https://{tunnel_host(worker.token, 8080)}" and worker.cost_per_hour == PRICES["H100"]
    assert worker.ends_at == ModalProvider.sandbox_end(lease)


def test_a_found_sandbox_of_a_gpu_type_without_a_price_is_removed_never_adopted(
    driver: ModalProvider, fake: FakeModal
) -> None:
    import modal

    lease = lease_for()
    client = modal.Client(fake.url, 1, fake.token)  # CLIENT_TYPE_CLIENT
    client.__enter__()
    app = modal.App.lookup("openalice-workers", create_if_missing=True, client=client)
    tags = {"openalice_scheduler": "managed", "openalice_lease_id": lease.lease_id, "openalice_gpu": "B300"}
    stray = modal.Sandbox.create(
        app=app,
        image=modal.Image.from_registry(RENDERER),
        gpu="B300",
        name=f"lease-{lease.lease_id}",
        tags=tags,
        encrypted_ports=[8080],
        client=client,
    ).object_id

    with pytest.raises(ProviderCapacityError, match="existed"):
        driver.provision(lease, {})

    assert fake.sandbox(stray)["status"] == "finished"


def test_an_outage_after_the_create_leaves_the_lease_pending_for_the_reconciler(
    driver: ModalProvider, fake: FakeModal
) -> None:
    driver.provision(lease_for(), {})  # the App is known now: the next create reaches SandboxCreate
    fake.configure(hang_next_creates=1)
    lease = lease_for()

    def down_after_create() -> None:
        while not any(each["tags"].get("openalice_lease_id") == lease.lease_id for each in fake.sandboxes()):
            time.sleep(0.02)
        fake.configure(unavailable=True)

    import threading

    watcher = threading.Thread(target=down_after_create, daemon=True)
    watcher.start()
    with pytest.raises(WorkerOutcomeUnknown):
        driver.provision(lease, {}, Deadline.within(6.0))
    watcher.join(timeout=5)


# --- price ceiling and regions ---------------------------------------------------------------------


def test_a_gpu_type_above_the_ceiling_is_never_made(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for(GpuClass.MID).replace(max_cost_per_hour=3.0)
    worker = driver.provision(lease, {})
    assert worker.cost_per_hour == PRICES["A100-80GB"]
    assert [sandbox["gpu"] for sandbox in fake.sandboxes()] == ["A100-80GB"]


def test_a_price_above_the_ceiling_is_told_in_plain_decimal(fake: FakeModal) -> None:
    driver = make_driver(fake, prices={**PRICES, "H100": 0.00002})
    lease = lease_for().replace(max_cost_per_hour=0.000001)
    with pytest.raises(PriceAboveCeiling, match=r"H100: 0\.00002 USD/h") as raised:
        driver.provision(lease, {})
    assert "e-0" not in str(raised.value)


def test_nothing_within_the_ceiling_says_the_cheapest_price_seen(driver: ModalProvider, fake: FakeModal) -> None:
    lease = lease_for(GpuClass.MID).replace(max_cost_per_hour=1.0)
    with pytest.raises(PriceAboveCeiling) as raised:
        driver.provision(lease, {})
    assert raised.value.cheapest == PRICES["A100-80GB"]
    assert fake.sandboxes() == []


def test_a_region_places_the_sandbox_there_at_modals_region_price(driver: ModalProvider, fake: FakeModal) -> None:
    worker = driver.provision(lease_for(region="eu"), {})
    (sandbox,) = live(fake)
    assert sandbox["regions"] == ["eu"]
    assert worker.cost_per_hour == pytest.approx(PRICES["H100"] * 1.5)
    narrow = driver.provision(lease_for(region="us-west"), {})
    assert narrow.cost_per_hour == pytest.approx(PRICES["H100"] * 1.75)


def test_the_price_bound_is_the_dearest_type_within_the_ceiling_at_the_regions_price(driver: ModalProvider) -> None:
    request = LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.MID, region="eu", max_cost_per_hour=5.0)
    assert driver.price_bound(request) == pytest.approx(PRICES["A100-80GB"] * 1.5)
    assert driver.regions() == ("eu", "us-west")


def test_a_region_modal_is_not_configured_for_is_not_served(driver: ModalProvider) -> None:
    assert driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.HIGH, region="eu")) is True
    assert driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.HIGH, region="ap")) is False
    assert driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.NONE)) is False


# --- release, listing, readiness, logs -------------------------------------------------------------


def test_release_waits_until_modal_reports_the_sandbox_finished(fake: FakeModal, driver: ModalProvider) -> None:
    fake.configure(terminate_seconds=1.0)
    lease = lease_for()
    worker = driver.provision(lease, {})
    started = time.monotonic()
    driver.release(lease.lease_id, worker.token)
    assert time.monotonic() - started >= 0.9
    assert fake.sandbox(worker.token)["result"]["exitcode"] == 137


def test_orphans_are_found_by_tag_and_others_sandboxes_are_not(fake: FakeModal, driver: ModalProvider) -> None:
    import modal

    lease = lease_for()
    worker = driver.provision(lease, {})
    client = modal.Client(fake.url, 1, fake.token)  # CLIENT_TYPE_CLIENT
    client.__enter__()
    app = modal.App.lookup("openalice-workers", client=client)
    image = modal.Image.from_registry(RENDERER)
    modal.Sandbox.create(app=app, image=image, gpu="T4", tags={"team": "other"}, client=client)

    listed = driver.list_managed()

    assert [(each.lease_id, each.token) for each in listed] == [(lease.lease_id, worker.token)]
    assert listed[0].created_at == lease.created_at


def test_a_sandbox_that_exits_while_booting_fails_with_modals_reason(fake: FakeModal, driver: ModalProvider) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    fake.exit(worker.token, 3, "renderer: CUDA driver not found")
    said = driver.readiness(lease.lease_id, worker.token)
    assert said.state is ReadinessState.FAILED
    assert "exited with code 3" in said.detail and "CUDA driver not found" in said.detail


def test_a_running_sandbox_with_its_tunnel_is_ready_alone_and_in_a_batch(
    fake: FakeModal, driver: ModalProvider
) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    assert worker.ready is False
    assert driver.readiness(lease.lease_id, worker.token).state is ReadinessState.READY
    assert driver.readiness_of({worker.token: lease.lease_id})[worker.token].state is ReadinessState.READY


def test_the_ready_probe_path_is_asked_of_the_tunnel_url(fake: FakeModal, driver: ModalProvider) -> None:
    from scheduler.clock import utc_now
    from scheduler.leases.readiness import ReadinessPolicy, decide

    lease = lease_for()
    worker = driver.provision(lease, {})
    probed: list[str] = []

    def probe(url: str, timeout: float) -> bool:
        probed.append(url)
        return False

    policy = ReadinessPolicy(probe_path="/healthz", probe=probe)
    said = driver.readiness(lease.lease_id, worker.token)
    state, _, _ = decide(lease.replace(endpoint=worker.endpoint), said, policy, utc_now, Deadline.within(5))
    assert state is ReadinessState.STARTING and probed == [f"{worker.endpoint}/healthz"]


def test_logs_hold_stdout_stderr_and_modals_own_lines(fake: FakeModal, driver: ModalProvider) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    fake.write_logs(worker.token, ["frame 1"])
    fake.write_logs(worker.token, ["warning: slow disk"], source="stderr")

    lines = driver.logs(lease.lease_id, worker.token, LogQuery(tail=10))

    assert [(line.source, line.text) for line in lines if line.source != "system"] == [
        ("stdout", "frame 1"),
        ("stderr", "warning: slow disk"),
    ]
    assert any(line.source == "system" and "scheduled on H100" in line.text for line in lines)


def test_logs_since_long_ago_are_the_sandboxes_whole_output(fake: FakeModal, driver: ModalProvider) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    fake.write_logs(worker.token, ["frame 1"])
    lines = driver.logs(lease.lease_id, worker.token, LogQuery(tail=10, since_ns=0))
    assert [line.text for line in lines if line.source == "stdout"] == ["frame 1"]


@pytest.mark.parametrize(
    ("since", "stdout"),
    [("0001-01-01T00:00:00Z", ["frame 1"]), ("9999-12-31T23:59:59-01:00", [])],
    ids=["year-1", "past-year-9999-in-utc"],
)
def test_logs_since_any_valid_rfc3339_time_are_lines_not_a_provider_error(
    fake: FakeModal, driver: ModalProvider, since: str, stdout: list[str]
) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    fake.write_logs(worker.token, ["frame 1"])
    lines = driver.logs(lease.lease_id, worker.token, LogQuery(tail=10, since_ns=parse_rfc3339_ns(since)))
    assert [line.text for line in lines if line.source == "stdout"] == stdout


def test_logs_of_a_finished_sandbox_are_gone(fake: FakeModal, driver: ModalProvider) -> None:
    lease = lease_for()
    worker = driver.provision(lease, {})
    fake.exit(worker.token, 0)
    with pytest.raises(WorkerGone, match="exited with code 0"):
        driver.logs(lease.lease_id, worker.token, LogQuery())


# --- settings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MODAL_PRICES", "H100"), ("MODAL_PRICES", "H100=-1"), ("MODAL_REGIONS", "eu"), ("MODAL_WORKER_PORT", "0")],
)
def test_a_bad_modal_setting_refuses_to_start_naming_it(variable: str, value: str) -> None:
    from scheduler.config import Settings
    from scheduler.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_environ({"PROVIDERS": "modal", variable: value})


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"MODAL_GPU_TYPES_HIGH": "H100,B300"}, "MODAL_GPU_TYPES_HIGH names B300"),
        ({"MODAL_PRICES": "H100=3.9492"}, "MODAL_GPU_TYPES_ENTRY names L4; MODAL_GPU_TYPES_MID names A100-80GB"),
    ],
    ids=["a-type-past-the-defaults", "prices-without-the-default-types"],
)
def test_a_gpu_type_without_a_price_refuses_to_start_naming_its_variable(environ: dict[str, str], named: str) -> None:
    from scheduler.config import Settings

    with pytest.raises(ConfigurationError, match=named):
        Settings.from_environ({"PROVIDERS": "modal", **environ})


def test_a_driver_given_a_gpu_type_without_a_price_is_never_built(fake: FakeModal) -> None:
    with pytest.raises(ConfigurationError, match="B300"):
        make_driver(fake, gpu_types={GpuClass.HIGH: ("B300",)})


@pytest.mark.parametrize("price", ["\u0663.\u0669", "\uff13.9", "3_9"], ids=["arabic-indic", "fullwidth", "underscore"])
def test_modal_prices_in_other_digits_refuse_to_start(price: str) -> None:
    from scheduler.config import Settings

    prices = f"L4=0.7992,A100-80GB=2.4984,H100={price}"
    with pytest.raises(ConfigurationError, match=r"MODAL_PRICES=.*H100 at .*digits 0-9"):
        Settings.from_environ({"PROVIDERS": "modal", "MODAL_PRICES": prices})


def test_the_modal_token_never_shows_in_the_settings() -> None:
    from scheduler.config import Settings

    settings = Settings.from_environ({"PROVIDERS": "modal", "MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-2"})
    assert "as-2" not in repr(settings.sections)


def test_without_a_token_modal_serves_nothing_and_lists_nothing() -> None:
    from scheduler.providers.modal import ModalSettings
    from scheduler.providers.modal.driver import from_settings

    driver = from_settings(ModalSettings(modal_renderer_image=RENDERER))
    assert driver.available(LeaseRequest(kind=WorkerKind.RENDERER, gpu=GpuClass.HIGH)) is False
    assert driver.list_managed() == []
