"""Scale out: placement across a fleet of Docker hosts, and RunPod calls per lease and 429s under a quota.

- Placement: N concurrent acquires (the real `acquire` use case, the store on moto) against a fleet of
  in-memory hosts with caps (`DOCKER_HOSTS`-style specs, counters in the counters table): leases per
  host, refusals, and whether any host ever went over its cap.
- RunPod: M leases acquired and released at once, each by its own driver instance (one per
  invocation), against the fake RunPod enforcing a quota (`"ten";q=30;w=10` by default), with the
  account's budget shared in the counters table, and the same without the budget: requests per
  lease, 429s, wall time.

Writes bench/results/scale_out.json.

    .venv/bin/python bench/scale_out.py [--acquires 60 --runpod-leases 15]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import Target, envelope, print_targets, quiet_stdout, write_result  # noqa: E402
from bench.handlers import DynamoDB  # noqa: E402

POLICY = '"ten";q=30;w=10'


def _tables(database: DynamoDB) -> tuple[Any, str, str]:
    from tests.support.tables import make_table

    client = database.client()
    return (
        client,
        make_table(client, "moto", "leases", "LeasesTable"),
        make_table(client, "moto", "counters", "LeaseCountersTable"),
    )


def placement(database: DynamoDB, acquires: int, caps: list[int]) -> dict[str, Any]:
    from scheduler.callers.model import SHARED_SECRET
    from scheduler.config import Settings
    from scheduler.leases.acquire import acquire
    from scheduler.leases.outcomes import Acquired
    from scheduler.models import WorkerKind
    from scheduler.providers.configured import ConfiguredProviders
    from scheduler.providers.local_docker.fleet import DockerFleet, split_token
    from scheduler.providers.local_docker.hosts import DockerHostSpec
    from scheduler.providers.memory import MemoryProvider
    from scheduler.request_models import LeaseRequest
    from scheduler.runtime import Runtime
    from scheduler.store import LeaseStore
    from scheduler.store.host_slots import StoreHostSlots

    client, leases_table, counters_table = _tables(database)
    store = LeaseStore(leases_table, client, counters_table=counters_table)
    specs = [DockerHostSpec(f"h{i}", f"tcp://127.0.0.1:{2376 + i}", max_leases=cap) for i, cap in enumerate(caps)]
    members = {spec.name: MemoryProvider() for spec in specs}
    fleet = DockerFleet([(spec, members[spec.name]) for spec in specs], StoreHostSlots(store))
    settings = Settings(providers=("local-docker",))
    registry = ConfiguredProviders(settings, factories={"local-docker": lambda _: fleet})
    ctx = Runtime(settings, store=store, providers=registry).context(None, SHARED_SECRET)
    request = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda _: acquire(ctx, request), range(acquires)))
    seconds = time.monotonic() - started
    placed: dict[str, int] = {spec.name: 0 for spec in specs}
    for outcome in outcomes:
        if isinstance(outcome, Acquired):
            host, _ = split_token(str(outcome.lease.provider_token))
            placed[str(host)] += 1
    counters = store.counter_values()
    return {
        "acquires": acquires,
        "caps": {spec.name: spec.max_leases for spec in specs},
        "placed": placed,
        "workers": {name: len(member.workers) for name, member in members.items()},
        "counters": {name: counters.get(spec.counter("local-docker"), 0) for spec in specs for name in [spec.name]},
        "refused": acquires - sum(placed.values()),
        "over_cap": sum(max(0, placed[spec.name] - (spec.max_leases or 0)) for spec in specs),
        "seconds": round(seconds, 2),
    }


def runpod(database: DynamoDB, leases: int, budget: bool) -> dict[str, Any]:
    from scheduler.lifecycle import LeaseStatus
    from scheduler.models import GpuClass, Lease, WorkerKind
    from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
    from scheduler.providers.runpod.quota import RequestBudget
    from scheduler.store.api_budget import ApiBudget
    from tests.fakes.runpod import start_fake_runpod

    client, leases_table, counters_table = _tables(database)
    shared = ApiBudget(leases_table, client, counters_table=counters_table)
    with start_fake_runpod("bench-key", {"tpl": {"ports": ["8080/http"]}}) as fake:
        fake.configure(enforce_quota=True, rate_limit_policy=POLICY)

        def cycle(_: int) -> str:
            now = datetime.now(UTC).replace(microsecond=0)
            lease = Lease(
                lease_id=str(uuid.uuid4()),
                provider="runpod",
                kind=WorkerKind.RENDERER,
                gpu=GpuClass.HIGH,
                status=LeaseStatus.PENDING,
                created_at=now,
                expires_at=now + timedelta(hours=1),
                ttl_seconds=3600,
            )
            driver = RunPodProvider(
                api=RunPodApi(fake.url, lambda: "bench-key", budget=RequestBudget(shared) if budget else None),
                templates={WorkerKind.RENDERER: "tpl", WorkerKind.ANIM: "tpl"},
                gpu_types={GpuClass.HIGH: ("NVIDIA H100 80GB HBM3",)},
                http_port=8080,
                retry=RetryPolicy(total_seconds=25, release_confirm_seconds=15),
            )
            try:
                worker = driver.provision(lease, {})
                driver.release(lease.lease_id, worker.token)
            except Exception as error:  # noqa: BLE001 - counted, not raised
                return type(error).__name__
            return "ok"

        started = time.monotonic()
        with ThreadPoolExecutor(leases) as pool:
            results = list(pool.map(cycle, range(leases)))
        seconds = time.monotonic() - started
        requests = len(fake.request_log)
        return {
            "leases": leases,
            "budget": budget,
            "policy": POLICY,
            "completed": results.count("ok"),
            "failures": [result for result in results if result != "ok"],
            "requests": requests,
            "requests_per_lease": round(requests / leases, 2),
            "429s": fake.rate_limited["quota"],
            "seconds": round(seconds, 1),
        }


def targets(result: dict[str, Any]) -> list[Target]:
    found = [
        Target("placement: leases over a host's cap", result["placement"]["over_cap"], 0),
        Target(
            "placement: refused while a host had room",
            max(
                0,
                result["placement"]["refused"]
                - max(0, result["placement"]["acquires"] - sum(result["placement"]["caps"].values())),
            ),
            0,
        ),
    ]
    for run in result["runpod"]:
        if run["budget"]:
            found.append(Target(f"runpod: {run['leases']} concurrent leases, 429s with the budget", run["429s"], 0))
            found.append(Target(f"runpod: {run['leases']} leases, requests per lease", run["requests_per_lease"], 3.0))
    return found


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section."""
    placed = result["placement"]
    lines = [
        "## Scale out",
        "",
        f"Placement: {placed['acquires']} concurrent acquires on hosts with caps {placed['caps']}: placed "
        f"{placed['placed']}, refused {placed['refused']}, over a cap {placed['over_cap']} ({placed['seconds']} s).",
        "",
        "| RunPod leases at once | budget | requests | per lease | 429s | completed | seconds |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in result["runpod"]:
        lines.append(
            f"| {run['leases']} | {'shared' if run['budget'] else 'none'} | {run['requests']} | "
            f"{run['requests_per_lease']} | {run['429s']} | {run['completed']} | {run['seconds']} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acquires", type=int, default=60)
    parser.add_argument("--caps", default="10,20,20", help="max_leases of each host")
    parser.add_argument("--runpod-leases", default="10,15", help="comma list of concurrent RunPod leases")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    database = DynamoDB()
    try:
        with quiet_stdout():
            placed = placement(database, args.acquires, [int(cap) for cap in args.caps.split(",")])
        print(f"  placement: {placed['placed']} refused {placed['refused']}", flush=True)
        runs = []
        for leases in (int(n) for n in args.runpod_leases.split(",")):
            for budget in (True, False):
                with quiet_stdout():
                    runs.append(runpod(database, leases, budget))
                print(
                    f"  runpod {leases} leases, budget {budget}: {runs[-1]['requests']} requests,"
                    f" 429s {runs[-1]['429s']}",
                    flush=True,
                )
    finally:
        database.stop()
    result = {
        **envelope("scale_out", {"acquires": args.acquires, "caps": args.caps, "runpod_leases": args.runpod_leases}),
        "placement": placed,
        "runpod": runs,
    }
    found = targets(result)
    result["targets"] = [target.as_dict() for target in found]
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('scale_out', result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
