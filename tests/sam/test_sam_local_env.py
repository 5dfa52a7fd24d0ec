"""devstack/sam_local.py's `--env-vars` document: SAM silently drops a variable the template does not
declare, so every name it sets must be declared where it is used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.docker_host import TlsDockerHost
from devstack.template import SamTemplate, load_yaml


def _host() -> TlsDockerHost:
    path = Path("/nonexistent")
    return TlsDockerHost("tcp://127.0.0.1:2376", 2376, 0, path, path, path, path, path, path)


def _document() -> dict[str, dict[str, str]]:
    from devstack.sam_local import functions_env_vars

    tables = {variable: f"table-{variable.lower()}" for variable in SamTemplate.load().table_variables.values()}
    images = {"renderer": "openalice/renderer:dev", "anim": "openalice/anim:dev"}
    return functions_env_vars("http://127.0.0.1:1", tables, _host(), "arn:docker-tls", "arn:internal", images)


def test_every_variable_it_sets_is_declared_by_the_template() -> None:
    raw: dict[str, Any] = load_yaml()
    globals_ = set(raw["Globals"]["Function"]["Environment"]["Variables"])
    document = _document()

    assert set(document["Parameters"]) <= globals_, set(document["Parameters"]) - globals_
    for function, variables in document.items():
        if function == "Parameters":
            continue
        declared = set(raw["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {}))
        assert set(variables) <= declared | globals_, (function, set(variables) - declared - globals_)


def test_it_names_every_table_of_the_template() -> None:
    template = SamTemplate.load()

    assert set(template.table_variables.values()) <= set(_document()["Parameters"])


def test_it_refuses_a_template_that_cannot_point_the_functions_at_the_embedded_moto() -> None:
    from devstack.sam_local import require_endpoint_variable

    template = SamTemplate.load()
    variables = template.raw["Globals"]["Function"]["Environment"]["Variables"]
    template.raw["Globals"]["Function"]["Environment"]["Variables"] = {
        key: value for key, value in variables.items() if key != "AWS_ENDPOINT_URL"
    }

    with pytest.raises(SystemExit, match="AWS_ENDPOINT_URL"):
        require_endpoint_variable(template)
