"""The access rules (`scheduler.callers.access`), for the three roles in token and iam mode and for the shared
secret: what each caller may do to a lease, which owners its acquire, list, bulk release and usage cover,
and whose Idempotency-Keys it shares. The modes token and iam differ only in how the Caller is established,
so one Caller stands for both."""

from __future__ import annotations

import pytest

from scheduler.callers.access import (
    LeaseAction,
    acquire_owner,
    audit_name,
    check_owner_header,
    idempotency_key,
    lease_access,
    readable_owners,
    releasable_owners,
    require_operator,
)
from scheduler.callers.model import SHARED_SECRET, Caller, Role
from scheduler.errors import Forbidden, InvalidRequest, LeaseNotFound, NotLeaseOwner

ANIM = Caller("anim", Role.SERVICE, ("anim-service", "anim-batch"))
OPS = Caller("ops", Role.OPERATOR)
OPS_WITH_OWNER = Caller("ops", Role.OPERATOR, ("ops-owner",))
AUDIT = Caller("audit", Role.VIEWER)
LEASE = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
ACTIONS = list(LeaseAction)
CHANGES = [LeaseAction.RENEW, LeaseAction.RELEASE]
READS = [LeaseAction.READ, LeaseAction.LOGS]


# --- acquire: which owner a new lease gets -------------------------------------------------------


def test_a_service_acquire_without_owner_gets_its_first_owner() -> None:
    assert acquire_owner(ANIM, None) == "anim-service"


@pytest.mark.parametrize("owner", ANIM.owners)
def test_a_service_acquire_may_name_any_of_its_owners(owner: str) -> None:
    assert acquire_owner(ANIM, owner) == owner


def test_a_service_acquire_under_another_owner_is_forbidden() -> None:
    with pytest.raises(NotLeaseOwner, match="may not act for owner live-control"):
        acquire_owner(ANIM, "live-control")


def test_an_operator_acquire_may_name_any_owner() -> None:
    assert acquire_owner(OPS, "live-control") == "live-control"


def test_an_operator_acquire_without_owner_gets_its_own_first_owner_or_none() -> None:
    assert (acquire_owner(OPS_WITH_OWNER, None), acquire_owner(OPS, None)) == ("ops-owner", None)


@pytest.mark.parametrize("owner", [None, "audit-owner"])
def test_a_viewer_may_not_acquire(owner: str | None) -> None:
    with pytest.raises(Forbidden, match="viewer"):
        acquire_owner(AUDIT._replace(owners=("audit-owner",)), owner)


@pytest.mark.parametrize("owner", [None, "live-control"])
def test_the_shared_secret_acquires_under_the_owner_the_body_names(owner: str | None) -> None:
    assert acquire_owner(SHARED_SECRET, owner) == owner


# --- one lease: read, logs, renew, release -------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
def test_a_service_acts_on_its_owners_leases_without_x_lease_owner(action: LeaseAction) -> None:
    assert lease_access(ANIM, action, LEASE, "anim-batch", None) == "anim-batch"


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("lease_owner", ["live-control", None])
def test_another_owners_lease_is_not_found_to_a_service(action: LeaseAction, lease_owner: str | None) -> None:
    with pytest.raises(LeaseNotFound) as refused:
        lease_access(ANIM, action, LEASE, lease_owner, None)
    assert refused.value.message == f"lease {LEASE} not found"  # word for word what an unknown id answers


@pytest.mark.parametrize("action", ACTIONS)
def test_a_service_sending_its_own_owner_as_x_lease_owner_is_served(action: LeaseAction) -> None:
    assert lease_access(ANIM, action, LEASE, "anim-service", "anim-batch") == "anim-service"


@pytest.mark.parametrize("action", ACTIONS)
def test_a_service_sending_another_owner_as_x_lease_owner_is_forbidden(action: LeaseAction) -> None:
    with pytest.raises(NotLeaseOwner, match="X-Lease-Owner live-control"):
        lease_access(ANIM, action, LEASE, "live-control", "live-control")


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("lease_owner", ["live-control", None])
@pytest.mark.parametrize("header", [None, "anyone"])
def test_an_operator_acts_on_every_lease(action: LeaseAction, lease_owner: str | None, header: str | None) -> None:
    assert lease_access(OPS, action, LEASE, lease_owner, header) == lease_owner


@pytest.mark.parametrize("action", READS)
@pytest.mark.parametrize("lease_owner", ["live-control", None])
def test_a_viewer_reads_every_lease_and_its_logs(action: LeaseAction, lease_owner: str | None) -> None:
    assert lease_access(AUDIT, action, LEASE, lease_owner, None) == lease_owner


@pytest.mark.parametrize("action", CHANGES)
@pytest.mark.parametrize("lease_owner", ["live-control", None])
def test_a_viewer_changes_no_lease(action: LeaseAction, lease_owner: str | None) -> None:
    with pytest.raises(Forbidden, match="viewer"):
        lease_access(AUDIT, action, LEASE, lease_owner, None)


@pytest.mark.parametrize("header", [None, "live-control"])
def test_the_shared_secret_reads_every_lease_whatever_it_sends(header: str | None) -> None:
    assert lease_access(SHARED_SECRET, LeaseAction.READ, LEASE, "anim-service", header) == header


@pytest.mark.parametrize("action", [LeaseAction.LOGS, *CHANGES])
def test_the_shared_secret_acts_on_an_owned_lease_with_its_owner_as_x_lease_owner(action: LeaseAction) -> None:
    assert lease_access(SHARED_SECRET, action, LEASE, "anim-service", "anim-service") == "anim-service"


@pytest.mark.parametrize("action", [LeaseAction.LOGS, *CHANGES])
@pytest.mark.parametrize("header", [None, "live-control"])
def test_the_shared_secret_without_the_owners_name_is_forbidden(action: LeaseAction, header: str | None) -> None:
    with pytest.raises(NotLeaseOwner, match="belongs to another owner"):
        lease_access(SHARED_SECRET, action, LEASE, "anim-service", header)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("header", [None, "anyone"])
def test_the_shared_secret_acts_on_an_ownerless_lease(action: LeaseAction, header: str | None) -> None:
    assert lease_access(SHARED_SECRET, action, LEASE, None, header) == header


# --- X-Lease-Owner --------------------------------------------------------------------------------


@pytest.mark.parametrize("caller", [OPS, AUDIT, SHARED_SECRET])
def test_x_lease_owner_is_any_owner_for_an_operator_a_viewer_and_the_shared_secret(caller: Caller) -> None:
    check_owner_header(caller, "live-control")


def test_x_lease_owner_may_be_left_out() -> None:
    check_owner_header(ANIM, None)


# --- many leases: list, usage, bulk release ------------------------------------------------------


def test_a_service_list_or_usage_without_owner_covers_its_owners() -> None:
    assert readable_owners(ANIM, None) == ("anim-service", "anim-batch")


def test_a_service_list_or_usage_of_one_of_its_owners_covers_that_owner() -> None:
    assert readable_owners(ANIM, "anim-batch") == ("anim-batch",)


def test_a_service_list_or_usage_of_another_owner_is_forbidden() -> None:
    with pytest.raises(NotLeaseOwner, match="may not read owner live-control"):
        readable_owners(ANIM, "live-control")


@pytest.mark.parametrize("caller", [OPS, OPS_WITH_OWNER, AUDIT, SHARED_SECRET])
def test_anyone_else_lists_every_owner_or_the_one_named(caller: Caller) -> None:
    assert (readable_owners(caller, None), readable_owners(caller, "live-control")) == (None, ("live-control",))


def test_a_service_bulk_release_without_owner_covers_its_owners() -> None:
    assert releasable_owners(ANIM, None, None) == ("anim-service", "anim-batch")


def test_a_service_bulk_release_of_one_of_its_owners_needs_no_x_lease_owner() -> None:
    assert releasable_owners(ANIM, "anim-batch", None) == ("anim-batch",)


@pytest.mark.parametrize("header", [None, "anim-service"])
def test_a_service_bulk_release_of_another_owner_is_forbidden(header: str | None) -> None:
    with pytest.raises(NotLeaseOwner):
        releasable_owners(ANIM, "live-control", header)


def test_a_service_bulk_release_with_another_owner_as_x_lease_owner_is_forbidden() -> None:
    with pytest.raises(NotLeaseOwner, match="X-Lease-Owner"):
        releasable_owners(ANIM, "anim-service", "live-control")


def test_an_operator_bulk_releases_any_owner() -> None:
    assert releasable_owners(OPS, "live-control", None) == ("live-control",)


def test_an_operator_bulk_release_without_owner_covers_its_own_owners() -> None:
    assert releasable_owners(OPS_WITH_OWNER, None, None) == ("ops-owner",)


def test_an_operator_without_owners_must_name_whose_leases_to_release() -> None:
    with pytest.raises(InvalidRequest, match="owner_id: Field required: operator ops has no owners"):
        releasable_owners(OPS, None, None)


@pytest.mark.parametrize("owner", [None, "live-control"])
def test_a_viewer_bulk_releases_nothing(owner: str | None) -> None:
    with pytest.raises(Forbidden, match="viewer"):
        releasable_owners(AUDIT, owner, None)


def test_the_shared_secret_bulk_releases_the_owner_x_lease_owner_names() -> None:
    assert releasable_owners(SHARED_SECRET, "live-control", "live-control") == ("live-control",)


@pytest.mark.parametrize("header", [None, "anim-service"])
def test_the_shared_secret_bulk_release_without_the_owners_name_is_forbidden(header: str | None) -> None:
    with pytest.raises(NotLeaseOwner, match="X-Lease-Owner must equal owner_id"):
        releasable_owners(SHARED_SECRET, "live-control", header)


def test_the_shared_secret_bulk_release_must_name_the_owner() -> None:
    with pytest.raises(InvalidRequest, match="owner_id: Field required"):
        releasable_owners(SHARED_SECRET, None, None)


# --- idempotency, the registry, the audit trail ---------------------------------------------------


def test_idempotency_keys_are_each_callers_own() -> None:
    assert idempotency_key(ANIM, "k1") != idempotency_key(OPS, "k1")


def test_the_shared_secret_shares_idempotency_keys_as_before() -> None:
    assert idempotency_key(SHARED_SECRET, "k1") == "k1"


def test_an_operator_manages_callers() -> None:
    require_operator(OPS)


@pytest.mark.parametrize("caller", [ANIM, AUDIT])
def test_no_one_else_manages_callers(caller: Caller) -> None:
    with pytest.raises(Forbidden, match="only an operator manages callers"):
        require_operator(caller)


def test_in_secret_mode_no_one_manages_callers() -> None:
    with pytest.raises(Forbidden, match="AUTH_MODE=secret"):
        require_operator(SHARED_SECRET)


def test_the_audit_trail_names_the_caller_or_the_shared_secret() -> None:
    assert (audit_name(ANIM), audit_name(SHARED_SECRET)) == ("anim", "shared-secret")
