"""What the console's browser tests show: leases from three owners on both providers (local-docker and the RunPod
fake), a few ended ones (today's spend), thirty days of spend per owner written into the usage table as the store
keeps it, one lease with markup in its correlation_id, and the queue as the stack makes it: RunPod capped at its
three pods (`QUEUE_ENV`), one acquire queued for it, and the preemptible pod it preempts under a notice."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from tests.support.stack import RunningStack
from tests.support.waiting import wait_for

OWNERS = ("anim-service", "live-control", "research")
MARKUP = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
RUNPOD_CAP = 3  # one pod per owner: a fourth waits
VICTIM_PRIORITY, QUEUED_PRIORITY = 20, 80
NOTICE_SECONDS = 1800  # longer than the tests: the notice holds, the queued lease waits, throughout
# The stack's settings the queue needs: RunPod capped, a running pod preemptible at once, a notice that outlasts
# the tests (local-docker stays uncapped: the tests' own leases are Docker ones).
QUEUE_ENV = {
    "RUNPOD_MAX_LEASES": str(RUNPOD_CAP),
    "MIN_RUNTIME_SECONDS": "0",
    "PREEMPTION_NOTICE_SECONDS": str(NOTICE_SECONDS),
}


@dataclass
class Fleet:
    """The seeded leases, by owner and provider."""

    live: list[dict[str, Any]]  # every live lease but the queued one
    ended: list[dict[str, Any]]
    marked: dict[str, Any]  # its correlation_id holds MARKUP
    queued: dict[str, Any]  # waits for RunPod's cap, as the acquire's 202 answered it
    noticed: dict[str, Any]  # the RunPod pod preempted for it, read once its notice was given

    def of(self, owner: str, provider: str) -> dict[str, Any]:
        return next(lease for lease in self.live if lease["owner_id"] == owner and lease["provider"] == provider)


def bearer(stack: RunningStack, method: str, path: str, token: str, **kwargs: Any) -> requests.Response:
    return stack.request(method, path, secret="", headers={"Authorization": f"Bearer {token}"}, **kwargs)


def acquire(stack: RunningStack, token: str, expect: int = 201, **body: Any) -> dict[str, Any]:
    body.setdefault("kind", "renderer")
    answer = bearer(stack, "POST", "/v1/lease", token, json=body)
    assert answer.status_code == expect, answer.text
    return dict(answer.json()["lease"])


def seed_fleet(stack: RunningStack, token: str) -> Fleet:
    """Per owner a renderer on local-docker (gpu none) and a pod on RunPod (gpu entry: an anim pod, and for the last
    owner a renderer, whose template serves a port: a worker with an endpoint); per owner one more Docker lease
    released at once (a row of today's spend). The first owner's pod is preemptible at a low priority; a fourth
    pod (an H100, which RunPod alone offers), asked for at a higher priority by the second owner, waits in the queue
    and gets that pod a notice."""
    live, ended = [], []
    for number, owner in enumerate(OWNERS):
        live.append(acquire(stack, token, owner_id=owner, ttl_seconds=3600, correlation_id=f"shot-{number}"))
        kind = "renderer" if number == len(OWNERS) - 1 else "anim"
        pod: dict[str, Any] = {"owner_id": owner, "kind": kind, "gpu": "entry", "ttl_seconds": 5400 + 600 * number}
        if number == 0:
            pod.update(priority=VICTIM_PRIORITY, preemptible=True)
        live.append(acquire(stack, token, **pod))
        gone = acquire(stack, token, owner_id=owner, ttl_seconds=600)
        assert bearer(stack, "DELETE", f"/v1/lease/{gone['lease_id']}", token).status_code == 204
        ended.append(gone)
    marked = acquire(stack, token, owner_id=OWNERS[0], ttl_seconds=3600, correlation_id=MARKUP)
    live.append(marked)
    queued = acquire(
        stack,
        token,
        expect=202,
        owner_id=OWNERS[1],
        kind="anim",
        gpu="high",  # RunPod's alone: local-docker, uncapped, offers `entry` and would be tried again each sweep
        ttl_seconds=3600,
        priority=QUEUED_PRIORITY,
        queue_seconds=7200,
    )
    noticed = _noticed(stack, token, live[1]["lease_id"])
    return Fleet(live=live, ended=ended, marked=marked, queued=queued, noticed=noticed)


def _noticed(stack: RunningStack, token: str, lease_id: str) -> dict[str, Any]:
    """The lease once the queue's service has given it its notice (the stream's, within a second or two)."""

    def read() -> dict[str, Any]:
        return dict(bearer(stack, "GET", f"/v1/lease/{lease_id}", token).json()["lease"])

    return wait_for(lambda: (lease := read())["preempt_at"] and lease, 20, what=f"a preemption notice on {lease_id}")


def seed_usage_history(stack: RunningStack, days: int = 29, seed: int = 29) -> list[tuple[str, str, float]]:
    """Spend on each of the `days` days before today for every owner, on both providers, as the usage table keeps
    it (one item per owner, day, kind and provider); answers (owner, day, cost) of what was written."""
    env = stack.functions_env()
    client, table = stack.dynamodb(), env["USAGE_TABLE"]
    rng = random.Random(seed)
    today = datetime.now(UTC).date()
    written = []
    for back in range(1, days + 1):
        day = (today - timedelta(days=back)).isoformat()
        for weight, owner in zip((3.0, 1.5, 0.8), OWNERS, strict=True):
            if rng.random() < 0.15:
                continue  # an owner with no lease that day
            for kind, provider, rate in (("renderer", "local-docker", 0.4), ("anim", "runpod", 0.69)):
                seconds = int(rng.uniform(0.5, 6.0) * weight * 3600 * (rate / 0.69))
                micros = int(rate * seconds / 3600 * 1_000_000)
                client.put_item(
                    TableName=table,
                    Item={
                        "owner_key": {"S": f"owner#{owner}"},
                        "day_key": {"S": f"{day}#{kind}#{provider}"},
                        "owner_id": {"S": owner},
                        "day": {"S": day},
                        "kind": {"S": kind},
                        "provider": {"S": provider},
                        "leases": {"N": str(rng.randint(1, 6))},
                        "lease_seconds": {"N": str(seconds)},
                        "cost_micros": {"N": str(micros)},
                    },
                )
                written.append((owner, day, micros / 1_000_000))
    return written
