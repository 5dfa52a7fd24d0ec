"""Provisioning overhead vs the engine: lease cycles through the local stack against raw Docker, same host.

At concurrency 1 and 8, shuffled blocks of three kinds, four times over after a warm-up: `stack`
(acquire → release through `python -m devstack`), `raw-cli` (`docker run -d` + `docker rm -f`, the
issue's baseline) and `raw-api` (Engine API create + start / remove over one kept-alive TLS
connection). Per block: cycles/s, latencies, CPU per cycle by process group; from the stack's EMF
lines the driver's own ProvisionLatency/ReleaseLatency; leaks at the end. Details: bench/README.md.

    .venv/bin/python bench/provisioning.py [--cycles-c1 15 --cycles-c8 40 --reps 2]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO), str(_REPO / "layers" / "scheduler")]

from bench.common import (  # noqa: E402  # noqa: E402
    CpuSnapshot,
    Target,
    cell,
    cpu_by_group,
    emf_documents,
    envelope,
    function_lines,
    print_targets,
    summary,
    write_result,
)
from bench.dockerstack import (  # noqa: E402  # noqa: E402
    LEASE_BODY,
    Cycles,
    DockerTarget,
    api_session,
    docker_prerequisites,
    docker_target,
    lease_cycle,
    run_cycles,
    running_stack,
)

RAW_LABEL = "openalice.bench/raw"
THROUGHPUT_RATIO = 0.7
ACQUIRE_EXTRA_MS = 60.0
MODES = ("stack", "raw-cli", "raw-api")
OTHERS = "other processes on the machine"


@dataclass
class Block:
    mode: str
    concurrency: int
    run: Cycles
    cpu: dict[str, Any]
    provision_ms: list[float]  # the driver's own ProvisionLatency (stack only)
    release_ms: list[float]  # the driver's own ReleaseLatency (stack only)
    log_bytes: Counter[str]  # stack only: bytes each function printed

    @property
    def rate(self) -> float:
        return len(self.run.create_ms) / self.run.seconds if self.run.seconds else 0.0


class Runner:
    """Runs blocks of create → remove cycles of one kind at one concurrency."""

    def __init__(self, target: DockerTarget, stack: Any) -> None:
        self.target, self.stack, self.image = target, stack, target.images["renderer"]

    def _stack_cycle(self, session: Any) -> tuple[str | None, float, float]:
        return lease_cycle(session, self.stack.url)

    def _cli_cycle(self, _: Any) -> tuple[str | None, float, float]:
        def docker(*arguments: str) -> str:
            done = subprocess.run(
                ["docker", *arguments], env={**os.environ, **self.target.env}, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise RuntimeError(f"docker {arguments[0]}: {done.stderr.strip()[:120]}")
            return done.stdout.strip()

        started = time.perf_counter()
        container = docker("run", "-d", "--network", "none", "--label", f"{RAW_LABEL}=true", self.image)
        created = time.perf_counter()
        docker("rm", "-f", container)
        return None, (created - started) * 1000, (time.perf_counter() - created) * 1000

    def _api_cycle(self, client: Any) -> tuple[str | None, float, float]:
        api, started = client.api, time.perf_counter()
        host_config = api.create_host_config(network_mode="none")
        created = api.create_container(image=self.image, labels={RAW_LABEL: "true"}, host_config=host_config)
        api.start(created["Id"])
        done = time.perf_counter()
        api.remove_container(created["Id"], force=True)
        return None, (done - started) * 1000, (time.perf_counter() - done) * 1000

    def run_block(self, mode: str, concurrency: int, cycles: int) -> Block:
        step = {"stack": self._stack_cycle, "raw-cli": self._cli_cycle, "raw-api": self._api_cycle}[mode]
        resource = {"stack": lambda: api_session(self.stack.secret), "raw-api": lambda: self.target.client(60)}
        offset, before = self.stack.log_path.stat().st_size, CpuSnapshot.take()
        run = run_cycles(step, cycles, concurrency, resource.get(mode, lambda: None))
        block = Block(
            mode, concurrency, run, cpu_by_group(before, CpuSnapshot.take(), self.stack.process.pid), [], [], Counter()
        )
        if mode == "stack":  # what CloudWatch Logs would ingest (less Lambda's START/END/REPORT), and the EMF
            for function, line in function_lines(self.stack.log_path, offset):
                block.log_bytes[function] += len(line.encode()) + 1
            for _, document in emf_documents(self.stack.log_path, offset):
                block.provision_ms += [float(document["ProvisionLatency"])] if "ProvisionLatency" in document else []
                block.release_ms += [float(document["ReleaseLatency"])] if "ReleaseLatency" in document else []
        return block


def combine(blocks: list[Block]) -> dict[str, Any]:
    """Pooled figures of the blocks of one kind and concurrency."""
    create = [value for block in blocks for value in block.run.create_ms]
    remove = [value for block in blocks for value in block.run.remove_ms]
    seconds, cycles = sum(block.run.seconds for block in blocks), len(create)
    cpu: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for block in blocks:
        cpu.update(block.cpu.get("by_group_cpu_seconds", {}))
        errors.update(block.run.errors)
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
        result["driver_provision_ms"] = summary(provision, 1)
        result["driver_release_ms"] = summary([value for block in blocks for value in block.release_ms], 1)
        result["acquire_minus_driver_p50_ms"] = round(
            result["create_ms"]["p50"] - result["driver_provision_ms"]["p50"], 1
        )
        result["release_minus_driver_p50_ms"] = round(
            result["remove_ms"]["p50"] - result["driver_release_ms"]["p50"], 1
        )
        written = sum((block.log_bytes for block in blocks), Counter())
        result["log_bytes_per_cycle"] = {name: round(value / max(1, cycles)) for name, value in sorted(written.items())}
    return result


def per_rep(blocks: dict[tuple[int, str], list[Block]]) -> dict[str, dict[str, Any]]:
    """Each repetition's stack ÷ raw ratios: a block that shared the machine with someone else's burst
    shows up as one outlying repetition instead of moving the pooled figure unseen."""
    found: dict[str, dict[str, Any]] = {}
    for concurrency in (1, 8):
        stack = blocks[(concurrency, "stack")]
        for raw in ("raw-cli", "raw-api"):
            pairs = [(mine, theirs) for mine, theirs in zip(stack, blocks[(concurrency, raw)], strict=True)]
            pairs = [(mine, theirs) for mine, theirs in pairs if mine.rate and theirs.rate]
            ratios = [round(mine.rate / theirs.rate, 3) for mine, theirs in pairs]
            extras = [
                round(summary(mine.run.create_ms)["p50"] - summary(theirs.run.create_ms)["p50"], 1)
                for mine, theirs in pairs
            ]
            found[f"c={concurrency} vs {raw}"] = {
                "throughput_ratio": ratios,
                "acquire_minus_create_p50_ms": extras,
                "median_throughput_ratio": round(statistics.median(ratios), 3) if ratios else None,
                "median_acquire_minus_create_p50_ms": round(statistics.median(extras), 1) if extras else None,
                "other_processes_cpu_ms_per_cycle": [
                    round(
                        block.cpu.get("by_group_cpu_seconds", {}).get(OTHERS, 0.0)
                        * 1000
                        / max(1, len(block.run.create_ms)),
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
            rates, creates = (
                (stack["cycles_per_second"], baseline["cycles_per_second"]),
                (stack["create_ms"]["p50"], baseline["create_ms"]["p50"]),
            )
            found += [
                Target(
                    f"c={concurrency}: lease throughput ÷ {raw} throughput",
                    round(rates[0] / rates[1], 3),
                    THROUGHPUT_RATIO,
                    "×",
                    at_least=True,
                    note=f"{rates[0]} vs {rates[1]} cycles/s; {note}",
                ),
                Target(
                    f"c={concurrency}: acquire p50 − {raw} create+start p50",
                    round(creates[0] - creates[1], 1),
                    ACQUIRE_EXTRA_MS,
                    "ms",
                    note=f"{creates[0]} vs {creates[1]} ms; {note}",
                ),
            ]
    return found


def report(result: dict[str, Any]) -> list[str]:
    """The summary's section: each kind at each concurrency, and the leaks."""
    lines = [
        "## Provisioning vs the engine",
        "",
        "| concurrency | kind | cycles/s | create p50 ms | create p95 ms | remove p50 ms | "
        "driver provision p50 ms | acquire − driver p50 ms | CPU ms per cycle |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for concurrency, by_mode in result["results"].items():
        for mode, figures in by_mode.items():
            lines.append(
                f"| {concurrency} | {mode} | {figures['cycles_per_second']} | {figures['create_ms']['p50']} | "
                f"{figures['create_ms']['p95']} | {figures['remove_ms']['p50']} | "
                f"{cell(figures.get('driver_provision_ms', {}).get('p50'))} | "
                f"{cell(figures.get('acquire_minus_driver_p50_ms'))} | {figures['cpu_ms_per_cycle']} |"
            )
    return [*lines, "", f"Leaks after the run: {result.get('leaks')}"]


# A live lease may still hold its worker: pending, active, or releasing (its worker's removal in progress).
LIVE_STATUSES = ("pending", "active", "releasing")


def leaked_workers(target: DockerTarget, stack: Any) -> list[str]:
    """Containers of this stack's leases that have ended: a leak. The Docker host may be shared (other
    stacks' containers are not ours: this stack does not know their lease), and a lease whose release
    answered an error on a busy machine is still live (the sweep ends it at expiry): not a leak either."""
    leaked = []
    with api_session(stack.secret) as session:
        for lease_id, name in target.managed_containers().items():
            response = session.get(f"{stack.url}/v1/lease/{lease_id}", timeout=60)
            if response.status_code == 200 and response.json()["lease"]["status"] not in LIVE_STATUSES:
                leaked.append(name)
    return leaked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles-c1", type=int, default=6, help="cycles per block at concurrency 1")
    parser.add_argument("--cycles-c8", type=int, default=16, help="cycles per block at concurrency 8")
    parser.add_argument("--reps", type=int, default=4, help="times the sequence of blocks is repeated")
    parser.add_argument("--warmup-cycles", type=int, default=16, help="stack cycles at concurrency 8 before measuring")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if missing := docker_prerequisites():
        print(f"provisioning: skipped, no Docker host: {missing}")
        skipped = {**envelope("provisioning", vars(args) | {"json": None}), "skipped": missing}
        write_result("provisioning", skipped, args.json)
        return 0
    blocks: dict[tuple[int, str], list[Block]] = defaultdict(list)
    rng = random.Random(args.seed)
    with docker_target() as target, running_stack(target, {"SWEEP_INTERVAL_SECONDS": "60"}) as stack:
        runner = Runner(target, stack)
        print(f"provisioning: stack on {stack.url}, Docker host {target.env['DOCKER_HOST']}", flush=True)
        # Starts the acquire/release function environments a concurrency of 8 needs (their cold starts).
        warm = runner.run_block("stack", 8, args.warmup_cycles)
        runner.run_block("raw-cli", 2, 2)
        runner.run_block("raw-api", 2, 2)
        print(f"  warm-up: {len(warm.run.create_ms)} stack cycles, errors {dict(warm.run.errors)}", flush=True)
        for rep in range(args.reps):
            for concurrency, cycles in ((1, args.cycles_c1), (8, args.cycles_c8)):
                for mode in rng.sample(MODES, len(MODES)):
                    block = runner.run_block(mode, concurrency, cycles)
                    blocks[(concurrency, mode)].append(block)
                    print(f"  rep {rep + 1} c={concurrency} {mode:<8} {block.rate:6.2f} cycles/s", flush=True)
        client = target.client()
        raw = client.containers.list(all=True, filters={"label": f"{RAW_LABEL}=true"})
        for container in raw:
            container.remove(force=True)
        client.close()
        left = {"managed_containers_left": len(leaked_workers(target, stack)), "raw_containers_left": len(raw)}
    results = {str(level): {mode: combine(blocks[(level, mode)]) for mode in MODES} for level in (1, 8)}
    repetitions = per_rep(blocks)
    found = targets(results, repetitions)
    parameters = {"cycles_per_block": {"1": args.cycles_c1, "8": args.cycles_c8}, "reps": args.reps}
    parameters |= {"image": target.images["renderer"], "lease_body": LEASE_BODY, "docker_network": "none"}
    result = {
        **envelope("provisioning", parameters),
        "results": results,
        "per_repetition": repetitions,
        "leaks": left,
        "targets": [target_.as_dict() for target_ in found],
    }
    print("\n".join(report(result)))
    print_targets(found)
    print(f"wrote {write_result('provisioning', result, args.json)}")
    return 0 if not any(left.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
