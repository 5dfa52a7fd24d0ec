"""One configuration: every variable the functions read is a settings field, and the fields, template.yaml
and the README's configuration table say the same thing about each (where it comes from, its default).

A field set from a template parameter is set from that parameter in template.yaml, with the same
default, and the parameter's UPPER_SNAKE name is the variable (so `make run` takes an override under
that name); a field the template sets is set there; a local-only field is set nowhere in the template.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devstack.template import load_yaml, variable_of
from scheduler.config import (
    LIBRARY_VARIABLES,
    Settings,
    SettingsSection,
    Source,
    cap_parameter,
    cap_variable,
    provider_settings,
)
from scheduler.errors import ConfigurationError
from scheduler.providers.registry import known_providers

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = load_yaml()


def declared() -> dict[str, tuple[Source, Any]]:
    """Every variable a function reads: the core settings, each provider's, and each provider's cap."""
    sections: list[type[SettingsSection]] = [Settings, *(provider_settings(name) for name in known_providers())]
    found: dict[str, tuple[Source, Any]] = {}
    for section in sections:
        for variable, spec in section.variables().items():
            assert variable not in found, f"{variable} is declared twice"
            found[variable] = spec
    for name in known_providers():
        found[cap_variable(name)] = (Source(parameter=cap_parameter(name)), None)
    return found


def template_environment() -> dict[str, list[Any]]:
    """Each variable the template sets on some function, with every value it is given."""
    values: dict[str, list[Any]] = {}
    globals_ = TEMPLATE["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    sets = [globals_] + [
        resource["Properties"].get("Environment", {}).get("Variables", {})
        for resource in TEMPLATE["Resources"].values()
        if resource["Type"] == "AWS::Serverless::Function"
    ]
    for variables in sets:
        for variable, value in variables.items():
            if value != {"Ref": "AWS::NoValue"}:
                values.setdefault(variable, []).append(value)
    return values


def references(value: Any) -> set[str]:
    """Every `Ref` inside a template value."""
    if isinstance(value, dict):
        found = {value["Ref"]} if isinstance(value.get("Ref"), str) else set()
        return found.union(*(references(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(references(item) for item in value))
    return set()


def as_template_default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


DECLARED = declared()
ENVIRONMENT = template_environment()
PARAMETERS = TEMPLATE["Parameters"]


@pytest.mark.parametrize("variable", sorted(DECLARED))
def test_each_variable_is_set_where_its_field_says(variable: str) -> None:
    source, default = DECLARED[variable]
    if source.local:
        assert variable not in ENVIRONMENT, f"{variable} is local only, yet template.yaml sets it"
        return
    assert variable in ENVIRONMENT, f"{variable} ({source.label}) is not set in template.yaml"
    if source.parameter:
        assert source.parameter in PARAMETERS, f"template.yaml has no parameter {source.parameter}"
        assert all(source.parameter in references(value) for value in ENVIRONMENT[variable]), variable
        assert variable_of(source.parameter) == variable, f"`make run` reads {source.parameter} as another variable"
        assert str(PARAMETERS[source.parameter].get("Default", "")) == as_template_default(default), variable
    else:
        constants = [value for value in ENVIRONMENT[variable] if isinstance(value, str)]
        assert all(value == as_template_default(default) for value in constants), variable


@pytest.mark.parametrize("variable", sorted(ENVIRONMENT))
def test_each_variable_the_template_sets_is_read_by_a_field_or_a_library(variable: str) -> None:
    assert variable in DECLARED or variable in LIBRARY_VARIABLES, f"nothing reads {variable}"


def readme_rows() -> dict[str, list[str]]:
    """The README's configuration table: each variable named in a row's first cell, with the row's cells."""
    text = (REPO / "README.md").read_text()
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        for variable in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
            assert variable not in rows, f"the README names {variable} twice"
            rows[variable] = cells
    return rows


ROWS = readme_rows()


def test_the_readme_table_names_exactly_the_declared_variables() -> None:
    assert set(ROWS) == set(DECLARED)


@pytest.mark.parametrize("variable", sorted(DECLARED))
def test_the_readme_says_where_each_variable_comes_from(variable: str) -> None:
    source, _ = DECLARED[variable]
    where = ROWS[variable][3]
    if source.parameter:
        assert f"`{source.parameter}`" in where, (variable, where)
    else:
        assert source.label in where, (variable, where)


@pytest.mark.parametrize("variable", sorted(v for v, row in ROWS.items() if len(re.findall(r"`[A-Z_]+`", row[0])) == 1))
def test_the_readme_gives_each_variables_default(variable: str) -> None:
    _, default = DECLARED[variable]
    shown = ROWS[variable][2]
    expected = as_template_default(default)
    assert (expected in shown) if expected else ("—" in shown or "empty" in shown), (variable, shown)


def test_library_variables_are_not_read_by_our_code() -> None:
    assert not set(LIBRARY_VARIABLES) & set(DECLARED)


# --- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"LIVE_INDEX_SHARDS": "0"}, "LIVE_INDEX_SHARDS"),
        ({"LIVE_INDEX_SHARDS": "65"}, "LIVE_INDEX_SHARDS"),
        ({"STORE_RETRY_SECONDS": "soon"}, "STORE_RETRY_SECONDS"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL"),
        ({"LOCAL_DOCKER_MAX_LEASES": "-1"}, "LOCAL_DOCKER_MAX_LEASES"),
        ({"WORKER_PORT": "70000"}, "WORKER_PORT"),
        ({"PROVIDERS": "runpod", "RUNPOD_HTTP_PORT": "0"}, "RUNPOD_HTTP_PORT"),
        ({"AUTH_MODE": "tokens"}, "AUTH_MODE"),
        ({"AUTH_MODE": "IAM"}, "AUTH_MODE"),
        ({"AUTH_CACHE_SECONDS": "301"}, "AUTH_CACHE_SECONDS"),
        ({"AUTH_CACHE_SECONDS": "-1"}, "AUTH_CACHE_SECONDS"),
        ({"AUTH_CACHE_SECONDS": "\u0666\u0660"}, "AUTH_CACHE_SECONDS"),
        ({"OPERATOR_PRINCIPALS": "ops"}, "OPERATOR_PRINCIPALS"),
        ({"OPERATOR_PRINCIPALS": "arn:aws:sts::123456789012:assumed-role/ops/me"}, "OPERATOR_PRINCIPALS"),
    ],
)
def test_a_bad_value_refuses_to_start_naming_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_environ(environ)


def test_a_provider_named_twice_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError, match="twice"):
        Settings.from_environ({"PROVIDERS": "runpod,runpod"})


def test_each_providers_cap_comes_from_its_name() -> None:
    settings = Settings.from_environ({"LOCAL_DOCKER_MAX_LEASES": "3", "RUNPOD_MAX_LEASES": "0"})
    assert settings.provider_caps == {"local-docker": 3, "runpod": 0}


def test_only_the_configured_providers_settings_are_read() -> None:
    settings = Settings.from_environ({"PROVIDERS": "local-docker", "RUNPOD_HTTP_PORT": "not checked"})
    assert set(settings.sections) == {"local-docker"}


def test_secrets_never_show_in_the_settings_repr() -> None:
    settings = Settings.from_environ(
        {"INTERNAL_SECRET": "hunter2", "PROVIDERS": "runpod", "RUNPOD_API_KEY": "rp-secret-123"}
    )
    assert "hunter2" not in repr(settings) and "rp-secret-123" not in repr(settings.sections)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LIVE_INDEX_SHARDS", "\u0663"),  # int() reads Arabic-Indic ٣ as 3
        ("STORE_RETRY_SECONDS", "\uff13"),  # and fullwidth ３
        ("SWEEP_BATCH_SIZE", "1_000"),  # and underscores
        ("SWEEP_CONCURRENCY", "+3"),
        ("LOCAL_DOCKER_MAX_LEASES", "\u0663"),
        ("WORKER_PORT", "\uff18\uff10\uff18\uff10"),
        ("MAX_COST_PER_HOUR_PER_OWNER", "\u0661\u0662.\u0665"),  # float() reads ١٢.٥ as 12.5
        ("MAX_SPEND_PER_OWNER_PER_DAY", "1_0"),
        ("LOCAL_DOCKER_COST_PER_HOUR", "\u0661"),
        ("SWEEP_INTERVAL_SECONDS", "\u0666\u0660"),  # the daily budget's release lag is read from it
        ("SWEEP_INTERVAL_SECONDS", "\uff16\uff10"),
        ("SWEEP_INTERVAL_SECONDS", "6_0"),
    ],
)
def test_a_number_setting_in_other_than_ascii_digits_refuses_to_start_naming_the_variable(
    variable: str, value: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"{variable}=.*digits 0-9"):
        Settings.from_environ({variable: value})


def test_whole_number_settings_read_ascii_digits_and_a_minus() -> None:
    settings = Settings.from_environ({"LIVE_INDEX_SHARDS": "03", "LOCAL_DOCKER_MAX_LEASES": "0"})
    assert (settings.live_index_shards, settings.provider_caps) == (3, {"local-docker": 0})
    with pytest.raises(ConfigurationError, match="must be at least 0"):
        Settings.from_environ({"LOCAL_DOCKER_MAX_LEASES": "-1"})


def test_the_auth_settings_default_to_the_shared_secret_and_a_minute() -> None:
    settings = Settings.from_environ({})
    assert (settings.auth_mode, settings.auth_cache_seconds, settings.operator_principals) == ("secret", 60, ())


def test_operator_principals_read_a_comma_list_of_user_and_role_arns() -> None:
    raw = "arn:aws:iam::123456789012:role/ops, arn:aws-cn:iam::123456789012:user/path/alice"
    settings = Settings.from_environ({"AUTH_MODE": "iam", "OPERATOR_PRINCIPALS": raw})
    assert settings.operator_principals == (
        "arn:aws:iam::123456789012:role/ops",
        "arn:aws-cn:iam::123456789012:user/path/alice",
    )
