"""Provisioning overhead vs the engine: lease cycles through the local stack against raw Docker, same host, same run.

On the TLS Docker host (a fresh loopback dev host, or the one DOCKER_HOST/DOCKER_CERT_PATH name),
at concurrency 1 and 8, blocks of cycles of three kinds:

- `stack`: `POST /v1/lease` then `DELETE /v1/lease/{id}` through the local stack (`python -m
  devstack`: gateway, authorizer, one process per function environment, moto, the local-docker
  driver over mutual TLS);
- `raw-cli`: `docker run -d --network none <worker image>` then `docker rm -f <id>` through the
  same TLS engine — the issue's baseline;
- `raw-api`: the same two steps as Engine API calls (create + start, remove with force) over one
  kept-alive TLS connection per thread, as the driver makes them — a stricter baseline without
  the CLI's process start.

Blocks alternate (every kind at one concurrency, in a shuffled order, then the next; the whole
sequence four times, in short blocks) so drift on a shared machine lands on all kinds alike; each
repetition's ratios are reported too, with the CPU other processes took during each stack block. A warm-up block first
starts the stack's function environments. Per block: cycles/s, create (acquire) and remove
(release) latency, and CPU seconds per cycle by process group; from the stack's own EMF log
lines, the driver's ProvisionLatency/ReleaseLatency inside acquire/release. Leaks are checked at
the end. Writes bench/results/provisioning.json.

    .venv/bin/python bench/provisioning.py [--cycles-c1 15 --cycles-c8 40 --reps 2]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

import requests  # noqa: E402

from bench.common import Target, envelope, print_targets, summary, write_result  # noqa: E402
from bench.dockerstack import (  # noqa: E402
    MANAGED_LABEL,
    CpuSnapshot,
    DockerTarget,
    cpu_by_group,
    docker_prerequisites,
    docker_target,
    running_stack,
)

RAW_LABEL = "openalice.bench/raw"
LEASE_BODY = {"kind": "renderer", "ttl_seconds": 300}
THROUGHPUT_RATIO = 0.7
ACQUIRE_EXTRA_MS = 60.0
MODES = ("stack", "raw-cli", "raw-api")


@dataclass
class Block:
    mode: str
    concurrency: int
    cycles: int
    create_ms: list[float] = field(default_factory=list)
    remove_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    cpu: dict[str, Any] = field(default_factory=dict)
    log_bytes: Counter[str] = field(default_factory=Counter)  # stack only: bytes each function printed
    provision_ms: list[float] = field(default_factory=list)  # the driver's own ProvisionLatency (stack only)
    release_ms: list[float] = field(default_factory=list)  # the driver's own ReleaseLatency (stack only)


class Runner:
    """Runs blocks of create → remove cycles of one kind at one concurrency."""

    def __init__(self, target: DockerTarget, stack: Any, image: str) -> None:
        self.target = target
        self.stack = stack
        self.image = image
        self._log_offset = 0

    # One cycle's two steps per kind; each returns (create ms, remove ms) or raises.

    def _stack_cycle(self, session: requests.Session) -> tuple[float, float]:
        started = time.perf_counter()
        response = session.post(self.stack.url + "/v1/lease", json=LEASE_BODY, timeout=60)
        created = time.perf_counter()
        if response.status_code != 201:
            raise RuntimeError(f"acquire {response.status_code} {response.text[:120]}")
        lease_id = response.json()["lease"]["lease_id"]
        response = session.delete(f"{self.stack.url}/v1/lease/{lease_id}", timeout=60)
        removed = time.perf_counter()
        if response.status_code != 204:
            raise RuntimeError(f"release {response.status_code} {response.text[:120]}")
        return (created - started) * 1000, (removed - created) * 1000

    def _cli_cycle(self, _: Any) -> tuple[float, float]:
        env = self.target.cli_env()
        started = time.perf_counter()
        run = ["docker", "run", "-d", "--network", "none", "--label", f"{RAW_LABEL}=true", self.image]
        done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
        created = time.perf_counter()
        if done.returncode != 0:
            raise RuntimeError(f"docker run: {done.stderr.strip()[:120]}")
        removed_run = subprocess.run(
            ["docker", "rm", "-f", done.stdout.strip()], env=env, capture_output=True, text=True, timeout=60
        )
        removed = time.perf_counter()
        if removed_run.returncode != 0:
            raise RuntimeError(f"docker rm: {removed_run.stderr.strip()[:120]}")
        return (created - started) * 1000, (removed - created) * 1000

    def _api_cycle(self, client: Any) -> tuple[float, float]:
        api = client.api
        started = time.perf_counter()
        created = api.create_container(
            image=self.image,
            labels={RAW_LABEL: "true"},
            host_config=api.create_host_config(network_mode="none"),
            detach=True,
        )
        api.start(created["Id"])
        done = time.perf_counter()
        api.remove_container(created["Id"], force=True)
        removed = time.perf_counter()
        return (done - started) * 1000, (removed - done) * 1000

    def _resource(self, mode: str) -> Any:
        if mode == "stack":
            session = requests.Session()
            session.trust_env = False
            session.headers["X-Internal-Secret"] = self.stack.secret
            return session
        if mode == "raw-api":
            return self.target.client(timeout=60)
        return None

    def run_block(self, mode: str, concurrency: int, cycles: int) -> Block:
        block = Block(mode, concurrency, cycles)
        step = {"stack": self._stack_cycle, "raw-cli": self._cli_cycle, "raw-api": self._api_cycle}[mode]
        lock = threading.Lock()
        issued = 0

        def worker() -> None:
            nonlocal issued
            resource = self._resource(mode)
            try:
                while True:
                    with lock:
                        if issued >= cycles:
                            return
                        issued += 1
                    try:
                        create, remove = step(resource)
                    except Exception as error:  # noqa: BLE001 - counted, the block goes on
                        with lock:
                            block.errors[f"{type(error).__name__}: {str(error)[:100]}"] += 1
                        continue
                    with lock:
                        block.create_ms.append(create)
                        block.remove_ms.append(remove)
            finally:
                if resource is not None:
                    resource.close()

        log_offset = self._log_size()
        before = CpuSnapshot.take()
        started = time.perf_counter()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        block.seconds = time.perf_counter() - started
        block.cpu = cpu_by_group(before, CpuSnapshot.take(), self.stack.process.pid)
        if mode == "stack":
            block.provision_ms, block.release_ms, block.log_bytes = self._from_log(log_offset)
        return block

    def _log_size(self) -> int:
        return self.stack.log_path.stat().st_size

    def _from_log(self, offset: int) -> tuple[list[float], list[float], Counter[str]]:
        """Since `offset`: ProvisionLatency and ReleaseLatency (ms) from the functions' EMF documents, and
        the bytes each function wrote (log lines + EMF: what CloudWatch Logs would ingest, less Lambda's
        own START/END/REPORT lines)."""
        with self.stack.log_path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        provision, release = [], []
        written: Counter[str] = Counter()
        for line in text.splitlines():
            if line.startswith("[") and "] " in line:
                function, rest = line[1:].split("] ", 1)
                if function.endswith("Function"):
                    written[function] += len(rest.encode()) + 1
            if "Latency" not in line or "{" not in line:
                continue
            try:
                document = json.loads(line[line.index("{") :])
            except ValueError:
                continue
            if "ProvisionLatency" in document:
                provision.append(float(document["ProvisionLatency"]))
            if "ReleaseLatency" in document:
                release.append(float(document["ReleaseLatency"]))
        return provision, release, written


def combine(blocks: list[Block]) -> dict[str, Any]:
    """Pooled figures of the blocks of one kind and concurrency."""
    create = [value for block in blocks for value in block.create_ms]
    remove = [value for block in blocks for value in block.remove_ms]
    seconds = sum(block.seconds for block in blocks)
    cycles = len(create)
    cpu: dict[str, float] = defaultdict(float)
    for block in blocks:
        for name, value in block.cpu.get("by_group_cpu_seconds", {}).items():
            cpu[name] += value
    errors: Counter[str] = Counter()
    for block in blocks:
        errors.update(block.errors)
    result: dict[str, Any] = {
        "cycles_ok": cycles,
        "seconds": round(seconds, 2),
        "cycles_per_second": round(cycles / seconds, 3) if seconds else None,
        "create_ms": summary(create, 1),
        "remove_ms": summary(remove, 1),
        "errors": dict(errors),
        "cpu_ms_per_cycle": {name: round(value * 1000 / max(1, cycles), 1) for name, value in sorted(cpu.items())},
        "machine_busy_share": [block.cpu.get("busy_share") for block in blocks],
    }
    provision = [value for block in blocks for value in block.provision_ms]
    if provision:
        release = [value for block in blocks for value in block.release_ms]
        result["driver_provision_ms"] = summary(provision, 1)
        result["driver_release_ms"] = summary(release, 1)
        result["acquire_minus_driver_p50_ms"] = round(
            result["create_ms"]["p50"] - result["driver_provision_ms"]["p50"], 1
        )
        result["release_minus_driver_p50_ms"] = round(
            result["remove_ms"]["p50"] - result["driver_release_ms"]["p50"], 1
        )
        written: Counter[str] = Counter()
        for block in blocks:
            written.update(block.log_bytes)
        result["log_bytes_per_cycle"] = {name: round(value / max(1, cycles)) for name, value in sorted(written.items())}
    return result


def per_rep(blocks: dict[tuple[int, str], list[Block]]) -> dict[str, dict[str, Any]]:
    """Each repetition's stack ÷ raw ratios: a block that shared the machine with someone else's burst
    shows up as one outlying repetition instead of moving the pooled figure unseen."""
    found: dict[str, dict[str, Any]] = {}
    for concurrency in (1, 8):
        stack = blocks[(concurrency, "stack")]
        for raw in ("raw-cli", "raw-api"):
            ratios, extras = [], []
            for mine, theirs in zip(stack, blocks[(concurrency, raw)], strict=True):
                if mine.create_ms and theirs.create_ms and mine.seconds and theirs.seconds:
                    ratios.append(
                        round((len(mine.create_ms) / mine.seconds) / (len(theirs.create_ms) / theirs.seconds), 3)
                    )
                    extras.append(round(summary(mine.create_ms)["p50"] - summary(theirs.create_ms)["p50"], 1))
            found[f"c={concurrency} vs {raw}"] = {
                "throughput_ratio": ratios,
                "acquire_minus_create_p50_ms": extras,
                "median_throughput_ratio": round(statistics.median(ratios), 3) if ratios else None,
                "median_acquire_minus_create_p50_ms": round(statistics.median(extras), 1) if extras else None,
                "other_processes_cpu_ms_per_cycle": [
                    round(
                        block.cpu.get("by_group_cpu_seconds", {}).get("other processes on the machine", 0.0)
                        * 1000
                        / max(1, len(block.create_ms)),
                        1,
                    )
                    for block in stack
                ],
            }
    return found


def targets(results: dict[str, dict[str, Any]], reps: dict[str, dict[str, Any]] | None = None) -> list[Target]:
    found: list[Target] = []
    for concurrency, by_mode in results.items():
        stack = by_mode["stack"]
        for raw in ("raw-cli", "raw-api"):
            baseline = by_mode[raw]
            note = "the issue's baseline" if raw == "raw-cli" else "stricter reference: Engine API, no CLI process"
            rep = (reps or {}).get(f"c={concurrency} vs {raw}", {})
            if rep.get("throughput_ratio"):
                note += (
                    f"; per repetition {rep['throughput_ratio']} (median {rep['median_throughput_ratio']}), "
                    f"{rep['acquire_minus_create_p50_ms']} ms (median {rep['median_acquire_minus_create_p50_ms']})"
                )
            found.append(
                Target(
                    f"c={concurrency}: lease throughput ÷ {raw} throughput",
                    round(stack["cycles_per_second"] / baseline["cycles_per_second"], 3),
                    THROUGHPUT_RATIO,
                    "×",
                    at_least=True,
                    note=f"{stack['cycles_per_second']} vs {baseline['cycles_per_second']} cycles/s; {note}",
                )
            )
            found.append(
                Target(
                    f"c={concurrency}: acquire p50 − {raw} create+start p50",
                    round(stack["create_ms"]["p50"] - baseline["create_ms"]["p50"], 1),
                    ACQUIRE_EXTRA_MS,
                    "ms",
                    note=f"{stack['create_ms']['p50']} vs {baseline['create_ms']['p50']} ms; {note}",
                )
            )
    return found


def leaks(target: DockerTarget) -> dict[str, int]:
    client = target.client()
    try:
        managed = client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
        raw = client.containers.list(all=True, filters={"label": f"{RAW_LABEL}=true"})
        for container in raw:
            container.remove(force=True)
        return {"managed_containers_left": len(managed), "raw_containers_left": len(raw)}
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles-c1", type=int, default=6, help="cycles per block at concurrency 1")
    parser.add_argument("--cycles-c8", type=int, default=16, help="cycles per block at concurrency 8")
    parser.add_argument("--reps", type=int, default=4, help="times the sequence of blocks is repeated")
    parser.add_argument("--warmup-cycles", type=int, default=16, help="stack cycles at concurrency 8 before measuring")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    missing = docker_prerequisites()
    if missing:
        print(f"provisioning: skipped, no Docker host: {missing}")
        write_result(
            "provisioning", {**envelope("provisioning", vars(args) | {"json": None}), "skipped": missing}, args.json
        )
        return 0
    blocks: dict[tuple[int, str], list[Block]] = defaultdict(list)
    rng = random.Random(args.seed)
    with docker_target() as target, running_stack(target, {"SWEEP_INTERVAL_SECONDS": "60"}) as stack:
        runner = Runner(target, stack, target.images["renderer"])
        print(f"provisioning: stack on {stack.url}, Docker host {target.env['DOCKER_HOST']}", flush=True)
        # Starts the acquire/release function environments a concurrency of 8 needs (their cold starts).
        warm = runner.run_block("stack", 8, args.warmup_cycles)
        runner.run_block("raw-cli", 2, 2)
        runner.run_block("raw-api", 2, 2)
        print(f"  warm-up: {len(warm.create_ms)} stack cycles, errors {dict(warm.errors)}", flush=True)
        for rep in range(args.reps):
            for concurrency, cycles in ((1, args.cycles_c1), (8, args.cycles_c8)):
                order = list(MODES)
                rng.shuffle(order)
                for mode in order:
                    block = runner.run_block(mode, concurrency, cycles)
                    blocks[(concurrency, mode)].append(block)
                    rate = len(block.create_ms) / block.seconds
                    print(
                        f"  rep {rep + 1} c={concurrency} {mode:<8} {rate:6.2f} cycles/s "
                        f"create p50 {summary(block.create_ms, 1)['p50']} ms, errors {sum(block.errors.values())}, "
                        f"busy {block.cpu.get('busy_share')}",
                        flush=True,
                    )
        left = leaks(target)
    results = {
        str(concurrency): {mode: combine(blocks[(concurrency, mode)]) for mode in MODES} for concurrency in (1, 8)
    }
    for level, by_mode in results.items():
        print(f"concurrency {level}")
        for mode, figures in by_mode.items():
            extra = ""
            if "driver_provision_ms" in figures:
                extra = (
                    f" | driver provision p50 {figures['driver_provision_ms']['p50']} ms, "
                    f"acquire − driver {figures['acquire_minus_driver_p50_ms']} ms"
                )
            print(
                f"  {mode:<8} {figures['cycles_per_second']:>7} cycles/s  create p50 {figures['create_ms']['p50']:>7} "
                f"p95 {figures['create_ms']['p95']:>7}  remove p50 {figures['remove_ms']['p50']:>7} ms{extra}"
            )
            print(f"           CPU ms/cycle: {figures['cpu_ms_per_cycle']}")
            if "log_bytes_per_cycle" in figures:
                print(f"           log bytes/cycle: {figures['log_bytes_per_cycle']}")
    print(f"leaks: {left}")
    repetitions = per_rep(blocks)
    for name, repetition in repetitions.items():
        print(
            f"  {name}: throughput ratio per repetition {repetition['throughput_ratio']}, acquire − create p50 "
            f"{repetition['acquire_minus_create_p50_ms']} ms; other processes' CPU ms/cycle during the stack "
            f"blocks {repetition['other_processes_cpu_ms_per_cycle']}"
        )
    found = targets(results, repetitions)
    print_targets(found)
    result = {
        **envelope(
            "provisioning",
            {
                "cycles_per_block": {"1": args.cycles_c1, "8": args.cycles_c8},
                "reps": args.reps,
                "image": target.images["renderer"],
                "lease_body": LEASE_BODY,
                "docker_network": "none (stack: DOCKER_NETWORK=none; raw: --network none)",
            },
        ),
        "results": results,
        "per_repetition": repetitions,
        "leaks": left,
        "targets": [target_.as_dict() for target_ in found],
    }
    path = write_result("provisioning", result, args.json)
    print(f"wrote {path}")
    return 0 if not any(left.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
