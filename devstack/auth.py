"""`make run`'s callers: the bootstrap operator's token (AUTH_MODE=token) and the IAM principals whose SigV4
signatures the local gateway verifies (AUTH_MODE=iam), each kept under the state directory with mode 0600 the
first time it is made, as the shared secret is.

Token mode: `.local/admin-token` is the bootstrap operator `admin`'s token, which the authorizer reads as
BOOTSTRAP_TOKEN (in AWS: the BootstrapTokenSecret the stack creates), and with which the other callers are added
(`POST /v1/callers`). Iam mode: LOCAL_IAM_PRINCIPALS, a JSON list of `{"access_key_id", "secret_access_key",
"arn"}`, names the principals; without it `make run` makes one, `arn:aws:iam::000000000000:user/admin`, writes its
keys to `.local/iam-credentials` (an AWS shared credentials file, profile `openalice-local`) and makes it an
operator (OPERATOR_PRINCIPALS, unless that is set).
"""

from __future__ import annotations

import json
import os
import secrets
import string
from collections.abc import Callable, Mapping
from pathlib import Path

from devstack.sigv4 import Principal, parse_principals

LOCAL_ADMIN_ARN = "arn:aws:iam::000000000000:user/admin"
PROFILE = "openalice-local"


def kept_secret(path: Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The value kept at `path` (mode 0600), made the first time; True when it was made now."""
    made = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(make())
        made = True
    path.chmod(0o600)
    return path.read_text().strip(), made


def bootstrap_token(environ: Mapping[str, str], state_dir: Path) -> tuple[str, str | None]:
    """BOOTSTRAP_TOKEN from the environment, else the one in `.local/admin-token`; with a line saying where."""
    if environ.get("BOOTSTRAP_TOKEN"):
        return environ["BOOTSTRAP_TOKEN"], None
    path = state_dir / "admin-token"
    token, made = kept_secret(path, lambda: secrets.token_urlsafe(48))
    verb = "generated" if made else "reusing"
    return token, f"AUTH_MODE=token: the bootstrap operator admin's token: {verb} {path} (mode 0600)"


def local_principals(environ: Mapping[str, str], state_dir: Path) -> tuple[dict[str, Principal], dict[str, str], str]:
    """The principals the gateway verifies, the variables the functions get for them, and a line saying where."""
    if environ.get("LOCAL_IAM_PRINCIPALS", "").strip():
        principals = parse_principals(environ["LOCAL_IAM_PRINCIPALS"])
        return principals, {}, f"AUTH_MODE=iam: {len(principals)} principal(s) from LOCAL_IAM_PRINCIPALS"
    path = state_dir / "iam-credentials"
    alphabet = string.ascii_uppercase + string.digits

    def made() -> str:
        key = "AKIALOCAL" + "".join(secrets.choice(alphabet) for _ in range(11))
        return f"[{PROFILE}]\naws_access_key_id = {key}\naws_secret_access_key = {secrets.token_urlsafe(30)}\n"

    text, _ = kept_secret(path, made)
    values = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    admin = Principal(values["aws_access_key_id"], values["aws_secret_access_key"], LOCAL_ADMIN_ARN)
    extra = {} if environ.get("OPERATOR_PRINCIPALS", "").strip() else {"OPERATOR_PRINCIPALS": LOCAL_ADMIN_ARN}
    note = f"AUTH_MODE=iam: operator {LOCAL_ADMIN_ARN}, keys in {path} (profile {PROFILE}, mode 0600)"
    return {admin.access_key_id: admin}, extra, note


def principals_json(principals: Mapping[str, Principal]) -> str:
    """LOCAL_IAM_PRINCIPALS for these principals (what a test hands the stack)."""
    entries = [{key: value for key, value in principal._asdict().items() if value} for principal in principals.values()]
    return json.dumps(entries)
