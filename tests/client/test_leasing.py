"""`with client.lease(...)`: acquire, background renewal, lease_lost, release on every exit."""

from __future__ import annotations

import logging
import time

import pytest
from openalice_scheduler_client import LeaseHandle, NotFound, ProviderError, SchedulerClient, lease

from tests.client.fake_scheduler import FakeScheduler


def _wait_until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def test_lease_acquires_renews_in_the_background_and_releases_on_exit(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    with client.lease(kind="renderer", ttl_seconds=600, owner_id="svc", renew_every=0.05) as held:
        assert isinstance(held, LeaseHandle)
        first_expiry = held.expires_at
        _wait_until(lambda: held.renewals >= 2)
        assert fake.leases[held.lease_id]["status"] == "active"
        assert held.endpoint and held.provider == "fake" and held.provider_token

    renewals = fake.calls("POST", ".*/renew")
    assert len(renewals) >= 2
    assert all(r.body == {"ttl_seconds": 600} and r.header("X-Lease-Owner") == "svc" for r in renewals)
    assert held.expires_at >= first_expiry and not held.lost
    assert fake.leases[held.lease_id]["status"] == "released"
    assert fake.calls("DELETE")[0].header("X-Lease-Owner") == "svc"


def test_renewal_stops_when_the_block_ends(client: SchedulerClient, fake: FakeScheduler) -> None:
    with client.lease(kind="renderer", renew_every=0.05) as held:
        _wait_until(lambda: held.renewals >= 1)
    count = len(fake.calls("POST", ".*/renew"))

    time.sleep(0.2)

    assert len(fake.calls("POST", ".*/renew")) == count


def test_default_renewal_period_is_a_third_of_the_ttl(client: SchedulerClient) -> None:
    with client.lease(kind="anim", ttl_seconds=3) as held:
        entered = time.monotonic()
        _wait_until(lambda: held.renewals >= 1, timeout=3)
        assert 0.8 < time.monotonic() - entered < 1.5


def test_lease_releases_when_the_block_raises(client: SchedulerClient, fake: FakeScheduler) -> None:
    with pytest.raises(RuntimeError, match="render failed"), client.lease(kind="renderer") as held:
        raise RuntimeError("render failed")

    assert fake.leases[held.lease_id]["status"] == "released"


def test_lease_releases_on_keyboard_interrupt(client: SchedulerClient, fake: FakeScheduler) -> None:
    with pytest.raises(KeyboardInterrupt), client.lease(kind="renderer") as held:
        raise KeyboardInterrupt

    assert fake.leases[held.lease_id]["status"] == "released"


def test_release_failure_does_not_mask_the_blocks_exception(
    client: SchedulerClient, fake: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail("DELETE", "/v1/lease/.*", status=502, code="provider_error")

    with pytest.raises(RuntimeError) as raised, client.lease(kind="renderer"):
        raise RuntimeError("render failed")

    assert str(raised.value) == "render failed"
    assert any("releasing lease" in note for note in raised.value.__notes__)
    assert "release after a failed block did not succeed" in caplog.text


def test_release_failure_after_a_clean_block_is_raised(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("DELETE", "/v1/lease/.*", status=502, code="provider_error")

    with pytest.raises(ProviderError), client.lease(kind="renderer"):
        pass


def test_lease_ended_behind_the_clients_back_sets_lease_lost(
    client: SchedulerClient, fake: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openalice_scheduler_client")
    with client.lease(kind="renderer", renew_every=0.05) as held:
        fake.expire(held.lease_id)
        assert held.lease_lost.wait(5)
        assert held.lost and isinstance(held.renewal_error, NotFound)
    # the exit's release got 404 and logged it instead of raising
    assert "renewal refused" in caplog.text and "already ended when released" in caplog.text


def test_transient_renewal_failures_do_not_lose_a_lease_that_has_not_expired(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    client.retries = 0
    fake.fail("POST", ".*/renew", status=503, code="no_capacity", times=3)

    with client.lease(kind="renderer", ttl_seconds=600, renew_every=0.05) as held:
        _wait_until(lambda: held.renewals >= 1)
        assert not held.lost

    assert len(fake.calls("POST", ".*/renew")) >= 4


def test_renewals_failing_until_expiry_lose_the_lease(client: SchedulerClient, fake: FakeScheduler) -> None:
    client.retries = 0
    fake.fail("POST", ".*/renew", status=503, code="no_capacity", times=1000)

    with client.lease(kind="renderer", ttl_seconds=1, renew_every=0.1) as held:
        assert held.lease_lost.wait(5)
        assert held.renewal_error is not None and held.renewals == 0


def test_nothing_is_released_when_the_acquire_fails(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("POST", "/v1/lease", status=400, code="invalid_request")

    with pytest.raises(Exception, match="scripted"), client.lease(kind="renderer"):
        pytest.fail("the block must not run")

    assert fake.calls("DELETE") == []


def test_module_level_lease_uses_its_own_client(fake: FakeScheduler) -> None:
    with lease(kind="anim", ttl_seconds=60, url=fake.url, secret=fake.secret, env={"JOB": "1"}) as held:
        assert fake.leases[held.lease_id]["env"] == {"JOB": "1"}

    assert fake.leases[held.lease_id]["status"] == "released"
