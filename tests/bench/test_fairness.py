"""The fairness benchmark's arithmetic, and its in-memory part at a small size: under a full queue each owner's
lease-seconds follow its weight, every admission by the fair-share rule (the benchmark's target, at 200 admissions:
a regression in the admission order fails here, in `make test`, not only in `make bench`)."""

from __future__ import annotations

import pytest

from bench.fairness import memory_run
from bench.fairness_shares import lease_seconds, shares
from bench.fairness_stack import release_to_admission


def test_lease_seconds_count_only_within_the_window() -> None:
    spans = [("anim", 0.0, 10.0), ("anim", 5.0, 30.0), ("live", 12.0, 14.0), ("batch", 25.0, 40.0)]

    assert lease_seconds(spans, 5.0, 20.0) == {"anim": 20.0, "live": 2.0, "batch": 0.0}


def test_shares_are_compared_with_the_weights_share_in_points_and_relatively() -> None:
    found = shares({"anim": 45.0, "live": 30.0, "batch": 25.0})

    assert found["anim"]["share_percent"] == 45.0 and found["anim"]["weight_share_percent"] == 50.0
    assert found["anim"]["deviation_points"] == -5.0 and found["anim"]["deviation_relative_percent"] == -10.0
    assert found["live"]["deviation_relative_percent"] == 20.0


def test_each_release_is_paired_with_the_first_later_admission_not_paired_yet() -> None:
    releases = [1.0, 1.1, 5.0, 9.0]
    admissions = [0.5, 1.5, 1.6, 7.0]

    assert release_to_admission(releases, admissions) == pytest.approx([0.5, 0.5, 2.0])


@pytest.mark.parametrize("seed", [1, 26])
def test_under_a_full_queue_the_owners_share_the_cap_by_weight_and_every_admission_follows_the_rule(seed: int) -> None:
    found = memory_run(200, seed)

    assert found["admissions"] == 200 and found["order_violations"] == 0
    assert found["worst_relative_deviation_percent"] <= 5.0
    assert found["most_live_leases_after_a_pass"] == 8
