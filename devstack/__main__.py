"""`python -m devstack` — serve the lease API locally until Ctrl-C / SIGTERM (what `make run` does)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from devstack.dynamodb_faults import Faults
from devstack.settings import port, seconds
from devstack.stack import STATE_DIR, LocalStack
from scheduler.errors import ConfigurationError


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
    """Start the local stack in the foreground; a bad setting is one line naming it, and exit status 2."""
    try:
        return _serve(argv)
    except ConfigurationError as error:
        print(f"[devstack] {error}", file=sys.stderr, flush=True)
        return 2


def _serve(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    parser.add_argument("--port", type=int, default=port(os.environ, "PORT", 3000))
    parser.add_argument(
        "--ttl-lag",
        type=float,
        default=seconds(os.environ, "LOCAL_TTL_LAG_SECONDS", 10.0, above_zero=False),
        help="seconds past its TTL before the emulated TTL process deletes an item (AWS: up to days)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("DEVSTACK_STATE_DIR", str(STATE_DIR))),
        help="where the generated secret, the dev Docker host and stream failures live (default .local/)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        default=_flag(os.environ.get("DEVSTACK_FRESH", "")),
        help="start with empty tables (the previous snapshot is set aside); also DEVSTACK_FRESH=1",
    )
    parser.add_argument(
        "--no-persist",
        dest="persist",
        action="store_false",
        default=os.environ.get("DEVSTACK_PERSIST", "1").strip() not in ("0", "false", "no"),
        help="keep nothing: no table snapshot, and stop the dev Docker host on exit (DEVSTACK_PERSIST=0)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[devstack] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request access log
    try:
        faults = Faults.parse(os.environ.get("DYNAMODB_FAULTS", ""))
    except ValueError as error:
        raise ConfigurationError(f"invalid configuration: {error}") from None
    stack = LocalStack(
        port=args.port,
        ttl_lag_seconds=args.ttl_lag,
        state_dir=args.state_dir,
        persist=args.persist,
        fresh=args.fresh,
        faults=faults,
    )
    stack.start()
    try:
        stack.wait()
    finally:
        print("[devstack] stopping ...", file=sys.stderr, flush=True)
        stack.stop()
        print("[devstack] stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
