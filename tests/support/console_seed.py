"""What the console's browser tests show: leases from three owners on both providers (local-docker and the RunPod
fake), a few ended ones (today's spend), thirty days of spend per owner written into the usage table as the store
keeps it, one lease with markup in its correlation_id, and the queue's stand-in: two queued leases and a preemption
notice (issue 26)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from tests.support.console_proxy import StandIns, rfc3339
from tests.support.stack import RunningStack

OWNERS = ("anim-service", "live-control", "research")
MARKUP = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


@dataclass
class Fleet:
    """The seeded leases, by owner and provider."""

    live: list[dict[str, Any]]
    ended: list[dict[str, Any]]
    marked: dict[str, Any]  # its correlation_id holds MARKUP

    def of(self, owner: str, provider: str) -> dict[str, Any]:
        return next(lease for lease in self.live if lease["owner_id"] == owner and lease["provider"] == provider)


def bearer(stack: RunningStack, method: str, path: str, token: str, **kwargs: Any) -> requests.Response:
    return stack.request(method, path, secret="", headers={"Authorization": f"Bearer {token}"}, **kwargs)


def acquire(stack: RunningStack, token: str, **body: Any) -> dict[str, Any]:
    body.setdefault("kind", "renderer")
    answer = bearer(stack, "POST", "/v1/lease", token, json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json()["lease"])


def seed_fleet(stack: RunningStack, token: str) -> Fleet:
    """Per owner a renderer on local-docker (gpu none) and a pod on RunPod (gpu entry: an anim pod, and for the last
    owner a renderer, whose template serves a port: a worker with an endpoint); per owner one more Docker lease
    released at once (a row of today's spend)."""
    live, ended = [], []
    for number, owner in enumerate(OWNERS):
        live.append(acquire(stack, token, owner_id=owner, ttl_seconds=3600, correlation_id=f"shot-{number}"))
        kind = "renderer" if number == len(OWNERS) - 1 else "anim"
        live.append(acquire(stack, token, owner_id=owner, kind=kind, gpu="entry", ttl_seconds=5400 + 600 * number))
        gone = acquire(stack, token, owner_id=owner, ttl_seconds=600)
        assert bearer(stack, "DELETE", f"/v1/lease/{gone['lease_id']}", token).status_code == 204
        ended.append(gone)
    marked = acquire(stack, token, owner_id=OWNERS[0], ttl_seconds=3600, correlation_id=MARKUP)
    live.append(marked)
    return Fleet(live=live, ended=ended, marked=marked)


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


def stand_ins_for(fleet: Fleet) -> StandIns:
    """Two queued leases (issue 26's shape) and a preemption notice on anim-service's RunPod lease (stand-in, issue
    26: goes at its merge, for a queue the stack makes itself)."""
    now = datetime.now(UTC)

    def queued(owner: str, priority: int, position: int, waited: int, reason: str) -> dict[str, Any]:
        created = now - timedelta(seconds=waited)
        return {
            "lease_id": str(uuid.UUID(int=random.Random(position).getrandbits(128), version=4)),
            "provider": "runpod",
            "kind": "anim",
            "gpu": "high",
            "status": "queued",
            "endpoint": None,
            "created_at": rfc3339(created),
            "expires_at": rfc3339(created + timedelta(minutes=10)),  # a queued lease's: its queued_until
            "released_at": None,
            "provider_token": None,
            "owner_id": owner,
            "correlation_id": None,
            "region": None,
            "ttl_seconds": 3600,
            "cost_per_hour": None,
            "failure_reason": None,
            "worker_state": "starting",
            "ready_at": None,
            "max_cost_per_hour": None,
            "cost_usd": None,
            "created_by": "admin",
            "ended_by": None,
            "priority": priority,
            "preemptible": False,
            "queued_at": rfc3339(created),
            "queued_until": rfc3339(created + timedelta(minutes=10)),
            "queue_position": position,
            "queue_reason": reason,
            "admitted_at": None,
            "preempt_at": None,
        }

    cap = "every provider is at its lease cap (runpod: at its cap of 3 live leases)"
    victim = fleet.of(OWNERS[0], "runpod")
    return StandIns(
        queue=[queued(OWNERS[2], 80, 1, 42, cap), queued(OWNERS[1], 50, 2, 95, cap)],
        notices={
            victim["lease_id"]: {
                "preempt_at": rfc3339(now + timedelta(seconds=110)),
                "priority": 20,
                "preemptible": True,
            }
        },
    )
