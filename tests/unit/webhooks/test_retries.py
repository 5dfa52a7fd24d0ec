"""Retries (`scheduler/webhooks/retries.py`, `deliver.Courier`) on a fake clock: exponential backoff with jitter,
hops of at most 15 minutes, every attempt within WEBHOOK_RETRY_SECONDS of the first, then the dead-letter queue."""

from __future__ import annotations

import itertools
import random

from scheduler.webhooks.retries import HOP_SECONDS, MOST_SECONDS, after_failure, backoff

from .fakes import START, Arranged, Receiver


def test_the_backoff_doubles_within_its_jitter() -> None:
    rng = random.Random(1)
    for failed in range(1, 10):
        delay = backoff(failed, rng)
        ceiling = 2.0 * 2 ** (failed - 1)
        assert ceiling / 2 <= delay <= ceiling


def test_the_backoff_stops_growing_at_an_hour() -> None:
    assert MOST_SECONDS / 2 <= backoff(30, random.Random(1)) <= MOST_SECONDS


def test_a_delay_longer_than_a_hop_is_sent_one_hop_at_a_time() -> None:
    step = after_failure(START, 20, START + 10_000, 86_400, random.Random(1))

    assert step.due is not None and step.due - (START + 10_000) > HOP_SECONDS and step.delay == HOP_SECONDS


def test_a_failure_past_the_retry_time_goes_to_the_dead_letter_queue() -> None:
    assert after_failure(START, 3, START + 100, 100, random.Random(1)).due is None


def test_a_receiver_down_for_a_while_gets_the_delivery_once_it_recovers() -> None:
    arranged = Arranged(Receiver(503, 503, 503, 503, 200))

    states = arranged.run_until_settled()

    assert [state for _, state in states] == ["retrying"] * 4 + ["delivered"]
    waits = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(states)]
    assert 1 <= waits[0] <= 2 and all(b > a for a, b in itertools.pairwise(waits))


def test_every_attempt_carries_the_same_id_and_its_own_timestamp() -> None:
    receiver = Receiver(503, None, 200)
    arranged = Arranged(receiver)

    arranged.run_until_settled()

    ids = {headers["webhook-id"] for _, headers, _ in receiver.got}
    stamps = [int(headers["webhook-timestamp"]) for _, headers, _ in receiver.got]
    assert ids == {arranged.message()["event"]["id"]} and stamps == sorted(set(stamps)) and len(stamps) == 3


def test_a_dead_endpoint_is_tried_for_the_retry_time_then_dead_lettered() -> None:
    arranged = Arranged(Receiver(None), retry_seconds=86_400)

    states = arranged.run_until_settled()

    attempts = [at for at, state in states if state in ("retrying", "dead_lettered")]
    assert states[-1][1] == "dead_lettered"
    assert attempts[-1] - START <= 86_400 and attempts[-1] - START > 86_400 - MOST_SECONDS
    assert len(arranged.queue.dead) == 1 and arranged.queue.dead[0]["last_error"] == "TimeoutError: timed out"
    waits = [b - a for a, b in itertools.pairwise(attempts)]
    assert max(waits) <= MOST_SECONDS + 1


def test_a_message_handed_over_before_it_is_due_is_sent_on_unattempted() -> None:
    receiver = Receiver(200)
    arranged = Arranged(receiver)
    early = {**arranged.message(), "attempt": 9, "not_before": START + 2000}

    outcome = arranged.courier.deliver(early)

    assert outcome.state == "waiting" and receiver.got == [] and arranged.queue.sent[-1][1] == HOP_SECONDS


def test_with_no_retry_time_a_failure_is_dead_lettered_at_once() -> None:
    arranged = Arranged(Receiver(500), retry_seconds=0)

    assert [state for _, state in arranged.run_until_settled()] == ["dead_lettered"]
