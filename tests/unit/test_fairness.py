"""The queue's rules (`scheduler.fairness`), as pure functions: the admission order (priority, weighted share, age),
BestEffortFIFO, and the choice of whom to preempt (priority, share, age; MIN_RUNTIME_SECONDS; no loops)."""

from __future__ import annotations

from scheduler.fairness import Capacity, Notice, Rules, Running, Waiting, admission_order, plan
from scheduler.owner_policies import OwnerPolicies, OwnerPolicy

NOW = 1_796_011_200
RULES = Rules(OwnerPolicies(), min_runtime_seconds=300, notice_seconds=120)
FULL = Capacity({"docker": 0})


def waiting(
    lease_id: str, owner: str = "a", priority: int = 50, age: int = 0, providers: tuple[str, ...] = ("docker",)
) -> Waiting:
    return Waiting(lease_id, owner, priority, NOW - age, providers)


def running(
    lease_id: str,
    owner: str = "z",
    priority: int = 10,
    *,
    preemptible: bool = True,
    ran: int = 3600,
    left: int = 3600,
    provider: str = "docker",
    preempt_epoch: int | None = None,
    preempted_for: str | None = None,
) -> Running:
    return Running(
        lease_id, owner, provider, priority, preemptible, NOW - ran, NOW + left, preempt_epoch, preempted_for
    )


def weights(**weight: float) -> OwnerPolicies:
    return OwnerPolicies({owner: OwnerPolicy(weight=value) for owner, value in weight.items()})


# --- the order ---------------------------------------------------------------------------------------------


def test_the_highest_priority_comes_first_whatever_its_age() -> None:
    order = admission_order([waiting("old", priority=30, age=900), waiting("new", priority=80)], [], OwnerPolicies())
    assert order == ["new", "old"]


def test_among_equal_priorities_the_owner_with_the_fewest_live_leases_comes_first() -> None:
    live = [running("r1", owner="a"), running("r2", owner="a")]
    order = admission_order([waiting("a1", owner="a", age=900), waiting("b1", owner="b")], live, OwnerPolicies())
    assert order == ["b1", "a1"]


def test_live_leases_count_divided_by_their_owners_weight() -> None:
    live = [running("r1", owner="a"), running("r2", owner="a"), running("r3", owner="b")]
    queue = [waiting("a1", owner="a"), waiting("b1", owner="b", age=10)]
    assert admission_order(queue, live, weights(a=3)) == ["a1", "b1"]  # a: 2/3 < b: 1/1
    assert admission_order(queue, live, weights(a=1)) == ["b1", "a1"]  # a: 2/1 > b: 1/1


def test_only_live_leases_on_the_capacity_the_lease_waits_for_count_toward_its_owners_share() -> None:
    live = [running("r1", owner="a", provider="runpod"), running("r2", owner="a", provider="runpod")]
    queue = [waiting("a1", owner="a", age=900), waiting("b1", owner="b")]
    assert admission_order(queue, live, OwnerPolicies()) == ["a1", "b1"]


def test_among_equal_priorities_and_shares_the_oldest_comes_first() -> None:
    order = admission_order([waiting("young", age=5), waiting("old", age=50)], [], OwnerPolicies())
    assert order == ["old", "young"]


def test_each_lease_placed_counts_as_its_owners_so_owners_take_turns_by_weight() -> None:
    queue = [waiting(f"a{n}", owner="a", age=100 - n) for n in range(4)]
    queue += [waiting(f"b{n}", owner="b", age=50 - n) for n in range(4)]
    order = admission_order(queue, [], weights(a=2))
    assert [lease_id[0] for lease_id in order[:6]] == ["a", "b", "a", "a", "b", "a"]


# --- what fits now -----------------------------------------------------------------------------------------


def test_what_fits_is_admitted_in_order_up_to_the_free_slots() -> None:
    queue = [waiting("low", priority=10), waiting("high", priority=90), waiting("mid", priority=50)]
    assert plan(queue, [], Capacity({"docker": 2}), RULES, NOW).admit == ("high", "mid")


def test_a_lease_that_cannot_fit_does_not_block_those_behind_it() -> None:
    queue = [waiting("head", priority=90, providers=("runpod",)), waiting("next", priority=10)]
    assert plan(queue, [], Capacity({"runpod": 0, "docker": 1}), RULES, NOW).admit == ("next",)


def test_a_lease_whose_owner_is_at_its_quota_waits_and_others_go_in() -> None:
    live = [running("r1", owner="a")]
    queue = [waiting("a1", owner="a", priority=90), waiting("b1", owner="b")]
    assert plan(queue, live, Capacity({}, owner_limit=1), RULES, NOW).admit == ("b1",)


def test_a_provider_without_a_cap_has_room_for_everyone() -> None:
    queue = [waiting(f"w{n}", providers=("runpod",), age=n) for n in range(5)]
    assert len(plan(queue, [], Capacity({"docker": 0}), RULES, NOW).admit) == 5


def test_a_lease_falls_over_to_its_next_provider_with_room() -> None:
    queue = [waiting("w", providers=("docker", "runpod"))]
    assert plan(queue, [], Capacity({"docker": 0, "runpod": 1}), RULES, NOW).admit == ("w",)


# --- preemption --------------------------------------------------------------------------------------------


def test_a_waiting_lease_preempts_one_lower_priority_preemptible_lease() -> None:
    live = [running("victim", priority=10), running("other", priority=20)]
    found = plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices
    assert found == (Notice("victim", "w", NOW + 120, 80),)


def test_the_lowest_priority_is_preempted_first() -> None:
    live = [running("p30", priority=30, ran=400), running("p20", priority=20, ran=9000)]
    assert [n.victim for n in plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices] == ["p20"]


def test_among_equal_priorities_the_owner_furthest_over_its_weighted_share_is_preempted() -> None:
    live = [running("x1", owner="x", ran=9000), running("y1", owner="y", ran=400), running("y2", owner="y", ran=500)]
    assert [n.victim for n in plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices] == ["y1"]
    weighted = RULES._replace(policies=weights(y=4))  # y: 2/4 < x: 1/1
    assert [n.victim for n in plan([waiting("w", priority=80)], live, FULL, weighted, NOW).notices] == ["x1"]


def test_then_the_newest_is_preempted() -> None:
    live = [running("old", ran=9000), running("new", ran=400)]
    assert [n.victim for n in plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices] == ["new"]


def test_a_lease_younger_than_the_minimum_runtime_is_never_preempted() -> None:
    live = [running("young", ran=299)]
    assert plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices == ()
    assert plan([waiting("w", priority=80)], [running("ripe", ran=300)], FULL, RULES, NOW).notices != ()


def test_a_non_preemptible_lease_is_never_preempted() -> None:
    live = [running("kept", priority=0, preemptible=False)]
    assert plan([waiting("w", priority=100)], live, FULL, RULES, NOW).notices == ()


def test_only_a_strictly_lower_priority_is_preempted() -> None:
    assert plan([waiting("w", priority=50)], [running("equal", priority=50)], FULL, RULES, NOW).notices == ()


def test_a_lease_that_ends_before_the_notice_would_is_left_to_end() -> None:
    assert plan([waiting("w", priority=80)], [running("ending", left=120)], FULL, RULES, NOW).notices == ()


def test_each_waiting_lease_gets_one_victim_of_its_own() -> None:
    live = [running("v1", priority=10), running("v2", priority=20), running("v3", priority=30)]
    queue = [waiting("w1", priority=80, age=10), waiting("w2", priority=70)]
    notices = plan(queue, live, FULL, RULES, NOW).notices
    assert [(n.preemptor, n.victim) for n in notices] == [("w1", "v1"), ("w2", "v2")]


def test_no_preemption_loop_a_noticed_lease_is_not_chosen_again_nor_a_second_victim_noticed() -> None:
    live = [running("v1"), running("v2")]
    first = plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices
    noticed = [
        lease._replace(preempt_epoch=n.preempt_at, preempted_for=n.preemptor)
        for lease in live
        for n in first
        if n.victim == lease.lease_id
    ] + [lease for lease in live if lease.lease_id not in {n.victim for n in first}]
    assert len(first) == 1
    assert plan([waiting("w", priority=80)], noticed, FULL, RULES, NOW + 10).notices == ()


def test_a_slot_coming_free_from_a_notice_whose_preemptor_left_is_taken_before_noticing_another() -> None:
    live = [running("orphaned", preempt_epoch=NOW + 60, preempted_for="gone"), running("v2")]
    assert plan([waiting("w", priority=80)], live, FULL, RULES, NOW).notices == ()


def test_no_one_is_preempted_for_a_lease_its_own_quota_keeps_waiting() -> None:
    live = [running("mine", owner="a", priority=90, preemptible=False), running("v", owner="z")]
    assert plan([waiting("w", owner="a", priority=80)], live, Capacity({"docker": 0}, 1), RULES, NOW).notices == ()


def test_no_one_is_preempted_for_capacity_no_cap_counts() -> None:
    queue = [waiting("w", priority=80, providers=("runpod",))]
    assert plan(queue, [running("v", provider="runpod")], Capacity({}), RULES, NOW).notices == ()
