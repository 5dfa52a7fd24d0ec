"""Event delivery: lease transitions through `make run` to a webhook receiver on loopback that verifies every
delivery with the `standardwebhooks` package — all delivered, and how long from each transition to its delivery.

Ten leases are acquired (each two transitions: lease.active and lease.ready, a local-docker worker runs at
once), then renewed (one transition each, each to a later expiry: a renewal to the expiry a lease has changes
nothing, and DynamoDB writes no stream record for it) until `--transitions` have been made, each lease's
renewals one after the other, the leases' at once. The execution environments are warmed first (a cold start is
no transition). A transition's time is when its call was answered (the route's write is the last thing it does
before answering, so this is a few milliseconds after the write); the same figures from when each call was sent
(an upper bound: they include the provisioning of an acquire) are reported beside. The path measured is the
whole of the deployed one, emulated: moto's stream → the events function (history, bus, queue) → moto's SQS →
the delivery function → the receiver.

    .venv/bin/python bench/event_delivery.py [--transitions 200 --window 10]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, summary, write_result  # noqa: E402
from bench.dockerstack import api_session, docker_prerequisites, docker_target, running_stack  # noqa: E402
from tests.support.receiver import receiving  # noqa: E402

OWNER = "bench-events"
LEASES = 10
CONCURRENCY = LEASES
P99_LIMIT_SECONDS = 5.0


class Transitions:
    """When each (lease, sequence) transition was asked for and answered."""

    def __init__(self) -> None:
        self.sent: dict[tuple[str, int], float] = {}
        self.answered: dict[tuple[str, int], float] = {}
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def note(self, lease_id: str, sequences: range, sent: float, answered: float) -> None:
        with self._lock:
            for sequence in sequences:
                self.sent[(lease_id, sequence)] = sent
                self.answered[(lease_id, sequence)] = answered

    def fail(self, what: str) -> None:
        with self._lock:
            self.failures.append(what)


def warm(stack: Any) -> None:
    """As many warm execution environments of acquire and renew as calls will run at once (refused calls: no
    lease, no transition)."""
    session = api_session(stack.secret, pool=CONCURRENCY)
    unknown = f"{stack.url}/v1/lease/00000000-0000-4000-8000-000000000000/renew"
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda _: session.post(stack.url + "/v1/lease", json={}, timeout=60), range(CONCURRENCY)))
        list(pool.map(lambda _: session.post(unknown, json={}, timeout=60), range(CONCURRENCY)))


def drive(stack: Any, transitions: int) -> tuple[Transitions, float]:
    """Make `transitions` transitions: acquires (2 each) then renewals (1 each), spread over the leases; the time
    it took from the first call to the last answer."""
    made = Transitions()
    leases = max(1, min(LEASES, transitions // 4))
    renewals = transitions - 2 * leases
    session = api_session(stack.secret, pool=CONCURRENCY)
    acquired: list[str] = []
    started = time.time()

    def acquire(_: int) -> None:
        sent = time.time()
        answer = session.post(
            stack.url + "/v1/lease", json={"kind": "renderer", "ttl_seconds": 900, "owner_id": OWNER}, timeout=60
        )
        if answer.status_code != 201:
            made.fail(f"acquire {answer.status_code}")
            return
        lease_id = answer.json()["lease"]["lease_id"]
        made.note(lease_id, range(1, 3), sent, time.time())
        acquired.append(lease_id)

    def renew_lease(lease_id: str, count: int) -> None:
        for sequence in range(3, 3 + count):  # one after another: each lease's sequence follows its calls
            sent = time.time()
            answer = session.post(
                f"{stack.url}/v1/lease/{lease_id}/renew",
                json={
                    "ttl_seconds": 900 + sequence
                },  # a new expiry each time: a renewal to the same one changes nothing
                headers={"X-Lease-Owner": OWNER},
                timeout=60,
            )
            if answer.status_code != 200:
                made.fail(f"renew {answer.status_code}")
                return
            made.note(lease_id, range(sequence, sequence + 1), sent, time.time())

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(acquire, range(leases)))
        shares = [
            renewals // len(acquired) + (1 if index < renewals % len(acquired) else 0) for index in range(len(acquired))
        ]
        list(pool.map(renew_lease, acquired, shares))
    return made, time.time() - started


def run(transitions: int, settle_seconds: float) -> dict[str, Any]:
    with (
        docker_target() as target,
        running_stack(target, {"SWEEP_INTERVAL_SECONDS": "3600"}) as stack,
        receiving() as receiver,
    ):
        session = api_session(stack.secret)
        created = session.post(
            stack.url + "/v1/webhooks",
            json={"url": receiver.url, "owner_id": OWNER},
            headers={"X-Lease-Owner": OWNER},
            timeout=60,
        )
        created.raise_for_status()
        receiver.secret = created.json()["secret"]
        warm(stack)
        made, window = drive(stack, transitions)
        deadline = time.time() + settle_seconds
        while time.time() < deadline and len({d.event_id for d in receiver.accepted()}) < len(made.answered):
            time.sleep(0.1)
        accepted = receiver.accepted()
        first: dict[tuple[str, int], float] = {}
        for delivery in accepted:
            key = (delivery.event["data"]["lease_id"], delivery.event["data"]["sequence"])
            first[key] = min(first.get(key, delivery.received), delivery.received)
        ids = [delivery.event_id for delivery in accepted]
    from_answer = [first[key] - at for key, at in made.answered.items() if key in first]
    from_sent = [first[key] - at for key, at in made.sent.items() if key in first]
    return {
        "transitions_made": len(made.answered),
        "failures": made.failures,
        "window_seconds": round(window, 2),
        "delivered": len(first),
        "missing": len(set(made.answered) - set(first)),
        "unexpected": len(set(first) - set(made.answered)),
        "duplicates": len(ids) - len(set(ids)),
        "requests_received": len(receiver.deliveries),
        "all_verified": all(delivery.verified for delivery in receiver.deliveries),
        "latency_from_answer_s": summary(from_answer, 3),
        "latency_from_sent_s": summary(from_sent, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transitions", type=int, default=200)
    parser.add_argument("--window", type=float, default=10.0, help="the seconds the transitions must be made within")
    parser.add_argument("--settle", type=float, default=60.0, help="how long to wait for the last deliveries")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    parameters = {"transitions": args.transitions, "window_seconds": args.window, "concurrency": CONCURRENCY}
    missing = docker_prerequisites()
    if missing:
        print(f"event_delivery: skipped, no Docker host: {missing}")
        write_result("event_delivery", {**envelope("event_delivery", parameters), "skipped": missing}, args.json)
        return 0
    measured = run(args.transitions, args.settle)
    latency, sent = measured["latency_from_answer_s"], measured["latency_from_sent_s"]
    found = [
        Target(
            "transitions made within the window",
            measured["window_seconds"],
            args.window,
            "s",
            note=f"{measured['transitions_made']} transitions",
        ),
        Target(
            "transitions not delivered", float(measured["missing"]), 0.0, note=f"{measured['duplicates']} duplicates"
        ),
        Target(
            "transition to delivery p99",
            latency["p99"],
            P99_LIMIT_SECONDS,
            "s",
            note=f"p50 {latency['p50']} s, max {latency['max']} s; from the call sent: p99 {sent['p99']} s",
        ),
    ]
    result = {
        **envelope("event_delivery", parameters),
        "method": "a loopback receiver verifying each delivery with standardwebhooks; time of the first 2xx "
        "delivery of each (lease, sequence) minus when its transition's call was answered",
        **measured,
        "targets": [target.as_dict() for target in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('event_delivery', result, args.json)}")
    return 0


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section."""
    answer, sent = result["latency_from_answer_s"], result["latency_from_sent_s"]
    return [
        "## Event delivery",
        "",
        f"{result['transitions_made']} transitions in {result['window_seconds']} s; {result['delivered']} delivered "
        f"to a verifying receiver ({result['missing']} missing, {result['duplicates']} duplicates, every request "
        f"verified: {result['all_verified']}); transition to delivery p50 {answer['p50']} s, p95 {answer['p95']} s, "
        f"p99 {answer['p99']} s, max {answer['max']} s (from the call sent: p99 {sent['p99']} s).",
    ]


if __name__ == "__main__":
    sys.exit(main())
