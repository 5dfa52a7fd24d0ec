"""Contention: N concurrent acquires against a provider cap, with DynamoDB answering conflicts and throttling.

Starts the local stack with `LOCAL_DOCKER_MAX_LEASES=<cap>` and `DYNAMODB_FAULTS` (default
`conflict=0.1,throttle=0.05`), fires N acquires at once, and checks: exactly `cap` granted, every
other one 503 `no_capacity`; the provider counter exact while held; after release nothing left and
every counter 0. Results: bench/results/contention.json and .md; exit 0 only when all hold.

    .venv/bin/python bench/contention.py [--acquires 200 --cap 10 --faults conflict=0.1,throttle=0.05]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "layers" / "scheduler")]

from bench.common import RESULTS  # noqa: E402
from bench.dockerstack import docker_target, running_stack  # noqa: E402
from tests.support.contention import run  # noqa: E402


def markdown(result: dict[str, Any], faults: str) -> str:
    """The figures as a short Markdown report."""
    held = result["while_held"]["counters"]
    lines = [
        "# Contention: concurrent acquires against a provider cap, DynamoDB faults on",
        "",
        f"{result['date']} · {result['acquires']} concurrent acquires · `LOCAL_DOCKER_MAX_LEASES={result['cap']}`"
        f" · `DYNAMODB_FAULTS={faults}` · {result['seconds']} s",
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| granted (201) | {result['granted']} |",
        f"| refused 503 `no_capacity` | {result['refused_no_capacity']} |",
        f"| other 5xx | {result['server_errors']} |",
        f"| faults injected by the embedded DynamoDB | {result.get('faults_injected', '–')} |",
        f"| conflicts between the acquires themselves | {result.get('natural_conflicts', '–')} |",
        f"| provider counter while held / live leases | {held.get('provider#local-docker', 0)}"
        f" / {result['while_held']['live_leases']} |",
        f"| after release: live leases / managed containers | {result['after_release']['live_leases']}"
        f" / {result['after_release']['containers']} |",
        f"| after release: counters | {json.dumps(result['after_release']['counters'])} |",
        "",
        "| check | holds |",
        "| --- | --- |",
        *[f"| {name} | {'yes' if held else '**no**'} |" for name, held in result["checks"].items()],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Start a stack with the cap and the faults, run, write the results; 0 only if every check holds."""
    parser = argparse.ArgumentParser(prog="bench/contention.py", description=__doc__)
    parser.add_argument("--acquires", type=int, default=200)
    parser.add_argument("--cap", type=int, default=10)
    parser.add_argument("--faults", default="conflict=0.1,throttle=0.05", help="DYNAMODB_FAULTS for the stack")
    parser.add_argument("--json", type=Path, default=RESULTS / "contention.json")
    parser.add_argument("--markdown", type=Path, default=RESULTS / "contention.md")
    args = parser.parse_args(argv)
    if args.acquires < 1 or not 0 <= args.cap <= args.acquires:
        parser.error("--acquires must be ≥ 1 and --cap between 0 and --acquires")

    extra = {"LOCAL_DOCKER_MAX_LEASES": str(args.cap), "DYNAMODB_FAULTS": args.faults}
    with docker_target() as target, running_stack(target, extra) as stack:
        result = run(stack, target.env, args.acquires, args.cap)
    log = stack.final_log
    for key, marker in (("faults_injected", "DynamoDB faults injected: "), ("natural_conflicts", "between clients: ")):
        lines = [line for line in log.splitlines() if marker in line]
        result[key] = lines[-1].split(marker, 1)[-1] if lines else None
    result["faults"] = args.faults
    for path, text in (
        (args.json, json.dumps(result, indent=2) + "\n"),
        (args.markdown, markdown(result, args.faults)),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(markdown(result, args.faults))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
