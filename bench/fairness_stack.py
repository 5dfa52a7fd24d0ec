"""The fairness benchmark through `make run` (bench/fairness.py, part 2): the local stack on a TLS Docker host with
`LOCAL_DOCKER_MAX_LEASES=8` and the owners' weights in OWNER_POLICIES, the rest as `make run` sets it (the stream
serves the queue; the sweep, every 60 s, is the backstop).

A warm-up owner holds the cap while each owner queues WAITING_PER_OWNER leases; the warm-up leases are released at
once. A watcher lists the live leases every 0.1 s: each lease of an owner seen active is held for a seeded random
2–6 s and then released (DELETE, timed to its 204), and its owner queues another at once, so that every owner always
waits. A lease's lease-seconds run from the stack's own log line `queued lease admitted` (written once its worker
is made and the lease active; millisecond timestamps, so the watcher's poll does not shift them) to its release.

The time from a release to "the next admission" pairs the releases and the admissions in time order: each release
with the first admission at or after it not already paired with an earlier release. An admission is when the
watcher's listing first showed the lease out of the queue (`pending` or `active`, as the issue's integration test
reads it): the answer's time, so it is late by up to one poll plus one listing (`listing_seconds`). The time to the
lease being active (the log line) is given too: it adds the worker's provisioning.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from bench.common import CpuSnapshot, busy_since, emf_documents, summary
from bench.dockerstack import api_session, docker_prerequisites, docker_target, running_stack
from bench.fairness_shares import (
    CAP,
    OWNER_POLICIES,
    WAITING_PER_OWNER,
    WARMUP_OWNER,
    WEIGHTS,
    lease_seconds,
    shares,
    worst,
)

HOLD_SECONDS = (2.0, 6.0)
POLL_SECONDS = 0.1
ADMITTED = "queued lease admitted"  # admission.py, once the admitted lease is active
RELEASED = "lease released"  # the release function, once the worker is gone and the slot given back


class Driver:
    """The three owners keeping the queue full, and what happened when."""

    def __init__(self, stack: Any, admissions: int, seed: int) -> None:
        self.stack = stack
        self.url = stack.url
        self.session = api_session(stack.secret, pool=32)
        self.admissions = admissions
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.owner_of: dict[str, str] = {}  # lease id → owner, for every lease the driver made
        self.seen_active: set[str] = set()
        self.seen_admitted: dict[str, float] = {}  # lease id → the answer of the first listing showing it admitted
        self.listing_seconds: list[float] = []
        self.released: dict[str, float] = {}  # lease id → when its DELETE answered (epoch seconds)
        self.direct: list[str] = []  # acquires answered 201 (not an admission: should not happen)
        self.errors: Counter[str] = Counter()
        self.stop_topping_up = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=24, thread_name_prefix="fairness")

    def acquire(self, owner: str, **body: Any) -> dict[str, Any] | None:
        response = self.session.post(
            self.url + "/v1/lease", json={"kind": "renderer", "owner_id": owner, **body}, timeout=60
        )
        if response.status_code not in (201, 202):
            with self.lock:
                self.errors[f"acquire {response.status_code}"] += 1
            return None
        lease: dict[str, Any] = response.json()["lease"]
        with self.lock:
            self.owner_of[lease["lease_id"]] = owner
            if response.status_code == 201 and owner != WARMUP_OWNER:
                self.direct.append(lease["lease_id"])
        return lease

    def enqueue(self, owner: str) -> None:
        if not self.stop_topping_up.is_set():
            self.acquire(owner, ttl_seconds=300, queue_seconds=600)

    def release(self, lease_id: str, owner: str) -> None:
        response = self.session.delete(f"{self.url}/v1/lease/{lease_id}", headers={"X-Lease-Owner": owner}, timeout=60)
        done = time.time()
        with self.lock:
            if response.status_code == 204:
                self.released[lease_id] = done
            else:
                self.errors[f"release {response.status_code}"] += 1

    def hold_then_release(self, lease_id: str, owner: str, seconds: float) -> None:
        time.sleep(seconds)
        self.release(lease_id, owner)

    def watch(self) -> None:
        """Until `admissions` leases were seen active: hold each, release it, queue its owner another."""
        while True:
            asked = time.monotonic()
            listed = live_leases(self.session, self.url)
            answered = time.time()
            self.listing_seconds.append(time.monotonic() - asked)
            for lease in listed:
                owner = lease.get("owner_id")
                if owner in WEIGHTS and lease["status"] in ("pending", "active"):
                    self.seen_admitted.setdefault(lease["lease_id"], answered)
                if owner not in WEIGHTS or lease["status"] != "active" or lease["lease_id"] in self.seen_active:
                    continue
                self.seen_active.add(lease["lease_id"])
                hold = self.rng.uniform(*HOLD_SECONDS)
                self.pool.submit(self.hold_then_release, lease["lease_id"], owner, hold)
                self.pool.submit(self.enqueue, owner)
            if len(self.seen_active) >= self.admissions:
                return
            time.sleep(POLL_SECONDS)

    def run(self) -> dict[str, Any]:
        offset = self.stack.log_path.stat().st_size
        warmups = [self.acquire(WARMUP_OWNER, ttl_seconds=600) for _ in range(CAP)]
        list(self.pool.map(self.enqueue, [owner for owner in WEIGHTS for _ in range(WAITING_PER_OWNER)]))
        started = time.monotonic()
        list(self.pool.map(lambda lease: self.release(lease["lease_id"], WARMUP_OWNER), filter(None, warmups)))
        self.watch()
        seconds = time.monotonic() - started
        self.stop_topping_up.set()
        self.pool.shutdown(wait=True)  # the held leases are released
        self.empty()
        return self.figures(offset, seconds)

    def empty(self) -> None:
        """Cancel what still waits, then release what still runs (in that order: a release admits from the queue)."""
        for _ in range(5):
            leases = live_leases(self.session, self.url)
            if not leases:
                return
            for lease in sorted(leases, key=lambda lease: lease["status"] != "queued"):
                headers = {"X-Lease-Owner": lease["owner_id"]}
                self.session.delete(f"{self.url}/v1/lease/{lease['lease_id']}", headers=headers, timeout=60)

    def figures(self, offset: int, seconds: float) -> dict[str, Any]:
        admitted = logged(self.stack, offset, ADMITTED)
        # When each release ended, by the service's own log line (its answer reaches the driver a moment later).
        from_log = logged(self.stack, offset, RELEASED)
        released = self.released | {key: at for key, at in from_log.items() if key in self.released}
        ours = sorted((at, lease_id) for lease_id, at in admitted.items() if self.owner_of.get(lease_id) in WEIGHTS)
        counted = ours[: self.admissions]
        start, end = counted[0][0], counted[-1][0]
        spans = [(self.owner_of[lease_id], at, released.get(lease_id, end)) for at, lease_id in ours if at <= end]
        found = shares(lease_seconds(spans, start, end))
        # The warm-up's releases, all at once, are the setup, not a release among others: left out.
        releases = sorted(at for key, at in released.items() if at <= end and self.owner_of.get(key) in WEIGHTS)
        to_active = release_to_admission(releases, [at for at, _ in ours])
        to_admitted = release_to_admission(releases, list(self.seen_admitted.values()))
        paired = sorted(zip(releases, to_admitted, strict=False), key=lambda pair: -pair[1])
        return {
            "admissions": len(counted),
            "admissions_by_owner": dict(Counter(self.owner_of[lease_id] for _, lease_id in counted)),
            "window_seconds": round(end - start, 1),
            "driver_seconds": round(seconds, 1),
            "hold_seconds": list(HOLD_SECONDS),
            "shares": found,
            "worst_relative_deviation_percent": worst(found),
            "release_to_admission_seconds": summary(to_admitted, 3),
            "release_to_active_seconds": summary(to_active, 3),
            "listing_seconds": summary(self.listing_seconds, 3),
            "slowest_admissions": [[round(at - start, 3), round(took, 3)] for at, took in paired[:5]],
            "direct_acquires": len(self.direct),
            "errors": dict(self.errors),
            "sequence": self.sequence(counted, admitted, released, start),
        }

    def sequence(
        self, counted: list[tuple[float, str]], admitted: dict[str, float], released: dict[str, float], start: float
    ) -> list[list[Any]]:
        """Each admission (when logged) with each owner's live leases just before it, by the logged admissions and
        releases (the admission pass read them a moment earlier): [seconds from the first, owner, anim, live,
        batch]."""
        steps = []
        for at, lease_id in counted:
            live = Counter(
                self.owner_of[other]
                for other, began in admitted.items()
                if began < at and released.get(other, float("inf")) > at and self.owner_of.get(other) in WEIGHTS
            )
            steps.append([round(at - start, 3), self.owner_of[lease_id], *(live[name] for name in WEIGHTS)])
        return steps


def live_leases(session: Any, url: str) -> list[dict[str, Any]]:
    """Every live lease (one page: there are never more than a few dozen)."""
    answer = session.get(url + "/v1/leases", params={"limit": "1000"}, timeout=60)
    leases: list[dict[str, Any]] = answer.json()["leases"]
    return leases


def logged(stack: Any, offset: int, message: str) -> dict[str, float]:
    """lease id → when the stack logged `message` about it (epoch seconds, to the millisecond)."""
    found: dict[str, float] = {}
    for _, document in emf_documents(stack.log_path, offset):
        if document.get("message") == message and isinstance(document.get("lease_id"), str):
            stamp = datetime.strptime(str(document["timestamp"]), "%Y-%m-%d %H:%M:%S,%f%z")
            found[document["lease_id"]] = stamp.timestamp()
    return found


def release_to_admission(releases: list[float], admissions: list[float]) -> list[float]:
    """Each release (in time order) to the first admission at or after it not paired with an earlier release."""
    pending = sorted(admissions)
    latencies = []
    index = 0
    for released in sorted(releases):
        while index < len(pending) and pending[index] < released:
            index += 1
        if index == len(pending):
            break
        latencies.append(pending[index] - released)
        index += 1
    return latencies


def stack_figures(admissions: int, seed: int) -> dict[str, Any]:
    """Part 2 of the fairness benchmark, or why it was skipped."""
    missing = docker_prerequisites()
    if missing:
        return {"skipped": f"no Docker host: {missing}"}
    env = {"LOCAL_DOCKER_MAX_LEASES": str(CAP), "OWNER_POLICIES": OWNER_POLICIES}
    with docker_target() as target:
        with running_stack(target, env) as stack:
            before = CpuSnapshot.take()
            figures = Driver(stack, admissions, seed).run()
            figures["machine"] = busy_since(before)
            leases_left = len(live_leases(api_session(stack.secret), stack.url))
        containers_left = len(target.managed_containers())
        return figures | {"leaks": {"leases_left": leases_left, "managed_containers_left": containers_left}}
