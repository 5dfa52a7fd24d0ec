"""The callers registry through the client (`client.callers`) and `leasectl callers add|list|rotate|remove`, against
the fake lease API in AUTH_MODE=token (and iam, where callers sign as a principal and have no token)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from openalice_scheduler_client import AddedCaller, Caller, Conflict, Forbidden, NotFound, SchedulerClient
from openalice_scheduler_client.cli_callers import format_duration, grace

from tests.client.fake_callers import ADMIN_TOKEN
from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_auth import OPERATOR, credentials_file
from tests.client.test_cli import leasectl, run

ANIM = {"role": "service", "owners": ["anim-service", "anim-batch"]}
ONCE = "the token is shown this once and never again"


@pytest.fixture
def token_fake(fake: FakeScheduler) -> FakeScheduler:
    fake.auth.mode = "token"
    return fake


@pytest.fixture
def admin(token_fake: FakeScheduler) -> SchedulerClient:
    return SchedulerClient(token_fake.url, token=ADMIN_TOKEN, timeout=5.0, backoff=0.01, max_backoff=0.05)


def as_admin(fake: FakeScheduler, *argv: str) -> tuple[int, str, str]:
    """leasectl in-process as the bootstrap operator (its token in --token)."""
    return run(None, "--url", fake.url, "--token", ADMIN_TOKEN, *argv)


# --- the client ----------------------------------------------------------------------------------------


def test_add_sends_the_caller_and_returns_it_with_its_token_once(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    added = admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    assert token_fake.calls("POST", "/v1/callers")[0].body == {"name": "anim", **ANIM}
    assert isinstance(added, AddedCaller) and added.token and added.token.startswith("oas_")
    assert added.caller.name == "anim" and added.caller.owners == ("anim-service", "anim-batch")
    assert added.caller.role == "service" and added.caller.principal_arn is None
    assert added.caller.created_by == "admin" and added.caller.created_at.tzinfo is not None
    assert added.token not in repr(added)


def test_the_new_callers_token_calls_the_service(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    token = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]

    with SchedulerClient(token_fake.url, token=token) as anim:
        assert anim.list() == []


def test_list_returns_every_caller_without_a_token(admin: SchedulerClient) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]
    admin.callers.add("watcher", role="viewer")

    listed = admin.callers.list()

    assert [caller.name for caller in listed] == ["anim", "watcher"]
    assert all(isinstance(caller, Caller) for caller in listed) and listed[1].owners == ()
    assert "oas_" not in json.dumps([caller.raw for caller in listed])


def test_rotate_sends_the_grace_and_both_tokens_work_meanwhile(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    old = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]

    new = admin.callers.rotate("anim", grace_seconds=600)

    assert token_fake.calls("POST", "/v1/callers/anim/rotate")[0].body == {"grace_seconds": 600}
    assert new != old
    for token in (old, new):
        with SchedulerClient(token_fake.url, token=token) as anim:
            anim.list()


def test_rotate_without_a_grace_keeps_the_old_token_an_hour(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    admin.callers.rotate("anim")

    assert token_fake.requests[-1].body == {"grace_seconds": 3600}


def test_remove_stops_the_callers_tokens(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    token = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]

    admin.callers.remove("anim")

    assert admin.callers.list() == []
    with SchedulerClient(token_fake.url, token=token) as anim, pytest.raises(Exception) as refused:
        anim.list()
    assert getattr(refused.value, "status", None) == 401


def test_removing_an_unknown_caller_is_not_found(admin: SchedulerClient) -> None:
    with pytest.raises(NotFound):
        admin.callers.remove("nobody")


def test_a_removal_whose_answer_was_lost_counts_as_done_on_the_retrys_404(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]
    token_fake.fail("DELETE", "/v1/callers/anim", mode="apply_then_drop")

    admin.callers.remove("anim")

    assert len(token_fake.calls("DELETE", "/v1/callers/anim")) == 2 and admin.callers.list() == []


def test_a_taken_name_is_a_conflict(admin: SchedulerClient) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    with pytest.raises(Conflict):
        admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]


def test_only_an_operator_manages_callers(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    token = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]

    with SchedulerClient(token_fake.url, token=token) as anim, pytest.raises(Forbidden):
        anim.callers.list()


def test_owners_must_be_a_list_not_one_string(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    with pytest.raises(TypeError, match="not a string"):
        admin.callers.add("anim", role="service", owners="anim-service")

    assert token_fake.requests == []


def test_in_iam_mode_a_caller_signs_as_its_principal_and_has_no_token(
    fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake.auth.mode, fake.auth.principals, fake.auth.operator_arns = (
        "iam",
        {OPERATOR.access_key_id: OPERATOR},
        {OPERATOR.arn},
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials_file(tmp_path / "credentials", default=OPERATOR)))
    role_arn = "arn:aws:iam::000000000000:role/anim"

    with SchedulerClient(fake.url, auth="iam", region="us-east-1") as operator:
        added = operator.callers.add("anim", role="service", owners=["anim-service"], principal_arn=role_arn)
    signed = ["--url", fake.url, "--auth", "iam", "--region", "us-east-1"]
    code, out, err = run(
        None, *signed, "callers", "add", "ops", "--role", "operator", "--principal-arn", role_arn + "2"
    )

    assert fake.calls("POST", "/v1/callers")[0].body["principal_arn"] == role_arn
    assert added.token is None and added.caller.principal_arn == role_arn
    assert code == 0 and "token" not in out and err == ""


# --- leasectl callers --------------------------------------------------------------------------------


def test_callers_add_prints_the_caller_and_its_token_with_a_warning(token_fake: FakeScheduler) -> None:
    code, out, err = as_admin(token_fake, "callers", "add", "anim", "--owner", "anim-service", "--role", "service")

    assert code == 0, err
    fields = dict(line.split(None, 1) for line in out.splitlines())
    token = token_fake.auth.tokens and next(iter(token_fake.auth.tokens))
    assert fields == {
        "name": "anim",
        "role": "service",
        "owners": "anim-service",
        "principal_arn": "-",
        "created_at": token_fake.auth.callers["anim"]["created_at"],
        "created_by": "admin",
        "token": token,
    }
    assert ONCE in err and "leasectl callers rotate anim" in err and token not in err


def test_callers_add_json_prints_the_apis_body_and_still_warns(token_fake: FakeScheduler) -> None:
    code, out, err = as_admin(
        token_fake, "--json", "callers", "add", "anim", "--owner", "a", "b", "--owner", "c", "--role", "service"
    )

    assert code == 0
    body = json.loads(out)
    assert set(body) == {"caller", "token"} and body["caller"]["owners"] == ["a", "b", "c"]
    assert ONCE in err


def test_callers_add_sends_the_principal_arn(token_fake: FakeScheduler) -> None:
    arn = "arn:aws:iam::123456789012:role/ops"
    code, _, err = as_admin(token_fake, "callers", "add", "ops", "--role", "operator", "--principal-arn", arn)

    assert code == 0, err
    assert token_fake.calls("POST", "/v1/callers")[0].body == {
        "name": "ops",
        "owners": [],
        "role": "operator",
        "principal_arn": arn,
    }


def test_callers_add_needs_a_role_it_knows(token_fake: FakeScheduler) -> None:
    assert as_admin(token_fake, "callers", "add", "anim", "--owner", "o")[0] == 2
    code, _, err = as_admin(token_fake, "callers", "add", "anim", "--role", "root")
    assert code == 2 and "invalid choice: 'root'" in err and token_fake.requests == []


def test_callers_add_refused_names_each_problem(token_fake: FakeScheduler) -> None:
    code, _, err = as_admin(token_fake, "callers", "add", "Not_A_Name", "--role", "service")

    assert code == 1 and err.startswith("leasectl: invalid_request: ") and "  name: must match" in err


def test_callers_list_prints_a_table(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]
    admin.callers.add("ops", role="operator", principal_arn="arn:aws:iam::000000000000:role/ops")

    code, out, _ = as_admin(token_fake, "callers", "list")

    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["NAME", "ROLE", "OWNERS", "PRINCIPAL_ARN", "CREATED_AT", "CREATED_BY"]
    assert rows[0].split()[:4] == ["anim", "service", "anim-service,anim-batch", "-"]
    assert rows[1].split()[:4] == ["ops", "operator", "-", "arn:aws:iam::000000000000:role/ops"]
    assert header.index("ROLE") == rows[0].index("service") == rows[1].index("operator")


def test_callers_list_json_and_empty(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    assert as_admin(token_fake, "callers", "list")[:2] == (0, "No callers.\n")
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    code, out, _ = as_admin(token_fake, "--json", "callers", "list")

    assert code == 0 and [caller["name"] for caller in json.loads(out)["callers"]] == ["anim"]


def test_callers_rotate_prints_the_new_token_and_how_long_the_old_one_works(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    old = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]

    code, out, err = as_admin(token_fake, "callers", "rotate", "anim", "--grace", "30m")

    assert code == 0 and token_fake.requests[-1].body == {"grace_seconds": 1800}
    (line,) = out.splitlines()
    name, new = line.split()
    assert name == "token" and new.startswith("oas_") and new != old
    assert ONCE in err and "the previous tokens of anim keep working for 30m (until about " in err


def test_callers_rotate_with_no_grace_says_the_old_tokens_stop_now(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    code, out, err = as_admin(token_fake, "--json", "callers", "rotate", "anim", "--grace", "0")

    assert code == 0 and set(json.loads(out)) == {"token"} and "stop working now" in err


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("90", 90), ("90s", 90), ("30m", 1800), ("1h", 3600), ("7d", 604800)]
)
def test_a_grace_is_seconds_or_a_number_with_its_unit(text: str, seconds: int) -> None:
    assert grace(text) == seconds


@pytest.mark.parametrize("text", ["8d", "604801", "1.5h", "-1", "an hour", "1w"])
def test_a_grace_out_of_bounds_or_unreadable_is_a_usage_error(token_fake: FakeScheduler, text: str) -> None:
    code, _, err = as_admin(token_fake, "callers", "rotate", "anim", "--grace", text)

    assert code == 2 and "--grace" in err and token_fake.requests == []


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45, "45s"), (3600, "1h"), (5400, "1h30m"), (604800, "7d")])
def test_a_duration_is_shown_in_the_largest_exact_units(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


def test_callers_remove_prints_what_it_did(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    code, out, _ = as_admin(token_fake, "callers", "remove", "anim")

    assert code == 0 and out.startswith("removed caller anim ")
    assert as_admin(token_fake, "--json", "callers", "list")[1].strip().startswith('{\n  "callers": []')


def test_callers_remove_json_prints_an_empty_object_and_unknown_exits_1(
    admin: SchedulerClient, token_fake: FakeScheduler
) -> None:
    admin.callers.add("anim", **ANIM)  # type: ignore[arg-type]

    assert as_admin(token_fake, "--json", "callers", "remove", "anim")[:2] == (0, "{}\n")
    code, out, err = as_admin(token_fake, "--json", "callers", "remove", "anim")
    assert code == 1 and json.loads(out)["error"]["code"] == "not_found" and "leasectl: not_found: " in err


def test_a_service_caller_managing_callers_exits_1_forbidden(admin: SchedulerClient, token_fake: FakeScheduler) -> None:
    token = admin.callers.add("anim", **ANIM).token  # type: ignore[arg-type]
    assert token

    code, _, err = run(None, "--url", token_fake.url, "--token", token, "callers", "list")

    assert code == 1 and err.startswith("leasectl: forbidden: ")


@pytest.mark.parametrize("action", ["add", "rotate", "remove"])
def test_an_empty_name_is_a_usage_error(token_fake: FakeScheduler, action: str) -> None:
    code, _, err = as_admin(token_fake, "callers", action, "", *(["--role", "service"] if action == "add" else []))

    assert code == 2 and "NAME must not be empty" in err and token_fake.requests == []


def test_callers_needs_an_action() -> None:
    code, _, err = run(None, "callers")

    assert code == 2 and "ACTION" in err


@pytest.mark.parametrize("action", ["add", "list", "rotate", "remove"])
def test_every_callers_actions_help_ends_with_an_example(action: str) -> None:
    code, out, _ = run(None, "callers", action, "--help")

    example = out.split("\nexample:\n", 1)[1]
    assert code == 0 and example.startswith("  leasectl ") and f" callers {action}" in example


# --- completion ----------------------------------------------------------------------------------------


def _bash_complete(words: str) -> str:
    script = leasectl("completion", "bash").stdout
    parts = words.split(" ")
    probe = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(part) for part in parts)}); COMP_CWORD={len(parts) - 1}; "
        '_leasectl; echo "${COMPREPLY[*]}"'
    )
    return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("leasectl ca", "callers"),
        ("leasectl callers ", "add list rotate remove"),
        ("leasectl --token T callers r", "rotate remove"),
        ("leasectl callers add anim --role ", "service operator viewer"),
        ("leasectl callers add anim --p", "--principal-arn"),
        ("leasectl callers rotate anim --g", "--grace"),
        ("leasectl callers list --o", ""),
        ("leasectl list --o", "--owner"),
        ("leasectl --auth ", "secret token iam"),
        ("leasectl --auth iam --region us-east-1 --p", "--profile"),
        ("leasectl --", "--help --url --token --secret --auth --region --profile --json --version"),
    ],
)
def test_bash_completes_the_callers_actions_and_the_credential_options(words: str, expected: str) -> None:
    assert _bash_complete(words) == expected


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("leasectl callers ", ["add", "list", "remove", "rotate"]),
        ("leasectl --url http://x callers add anim --role ", ["operator", "service", "viewer"]),
        ("leasectl callers list --", ["--help"]),
        ("leasectl list --s", ["--status"]),
        ("leasectl --auth ", ["iam", "secret", "token"]),
    ],
)
def test_fish_completes_the_callers_actions(words: str, expected: list[str]) -> None:
    script = leasectl("completion", "fish").stdout
    completed = subprocess.run(
        ["fish", "--no-config", "-c", f"source; complete -C {words!r}"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert sorted(line.split("\t")[0] for line in completed.stdout.splitlines()) == expected, completed.stderr
