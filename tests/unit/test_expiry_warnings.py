"""The sweep's expiry warnings (`leases/expiry_warnings.py`, `lifecycle.WARN_EXPIRY`): an active lease is warned
once per expiry, EXPIRY_WARNING_SECONDS (up to a sweep period more) ahead; a renewal moves the next warning.
On moto, dynalite and the memory store."""

from __future__ import annotations

from datetime import timedelta

from scheduler.leases.expiry_warnings import warn_expiring
from scheduler.store.port import LeaseStorePort

from .builders import NOW, Leases, context, epoch

WARNING = 300
PERIOD = 60


def warn(store: LeaseStorePort, at_seconds: float, **settings: int) -> list[str]:
    """The leases one sweep `at_seconds` after NOW warns."""
    options = {"expiry_warning_seconds": WARNING, "sweep_interval_seconds": PERIOD, **settings}
    ctx = context(store, clock=lambda: NOW + timedelta(seconds=at_seconds), **options)
    return [lease.lease_id for lease in warn_expiring(ctx)]


def test_a_lease_is_warned_once_its_expiry_is_within_the_warning_and_a_sweep_period(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active(ttl_seconds=1000)

    assert warn(store, 1000 - WARNING - PERIOD - 1) == []
    assert warn(store, 1000 - WARNING - PERIOD) == [lease.lease_id]


def test_a_lease_is_warned_only_once_of_the_same_expiry(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active(ttl_seconds=1000)

    assert warn(store, 1000 - WARNING) == [lease.lease_id]
    assert warn(store, 1000 - WARNING + 30) == []


def test_a_renewal_moves_the_warning_to_the_new_expiry(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active(ttl_seconds=1000)
    assert warn(store, 1000 - WARNING) == [lease.lease_id]

    renewed_at = NOW + timedelta(seconds=1000 - WARNING + 10)
    store.renew(lease.lease_id, "alice", 1000, renewed_at)

    assert warn(store, 1000 - WARNING + 20) == []
    assert warn(store, 1000 - WARNING + 10 + 1000 - WARNING) == [lease.lease_id]


def test_an_expired_lease_is_not_warned(store: LeaseStorePort, leases: Leases) -> None:
    leases.active(ttl_seconds=100)

    assert warn(store, 100) == []


def test_pending_and_ended_leases_are_not_warned(store: LeaseStorePort, leases: Leases) -> None:
    leases.pending(ttl_seconds=100)
    leases.released(ttl_seconds=100)

    assert warn(store, 10) == []


def test_a_lease_made_with_less_time_than_the_warning_is_warned_at_the_first_sweep(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active(ttl_seconds=120)

    assert warn(store, 1) == [lease.lease_id]


def test_no_warning_is_given_when_the_warning_is_zero(store: LeaseStorePort, leases: Leases) -> None:
    leases.active(ttl_seconds=120)

    assert warn(store, 1, expiry_warning_seconds=0) == []


def test_a_warning_loses_to_a_renewal_made_after_the_sweep_read_the_lease(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active(ttl_seconds=1000)
    store.renew(lease.lease_id, "alice", 2000, NOW + timedelta(seconds=5))

    assert not store.warn_expiry(lease.lease_id, epoch(lease.expires_at), NOW + timedelta(seconds=10))
