"""The RunPod fake answers as RunPod's OpenAPI description (REST API v2, pods) says it does.

Pods and problem bodies are checked against the description's own schemas with `jsonschema` when the
description is at hand (`RUNPOD_OPENAPI`, default ../shared/runpod/openapi-v2.json beside the repository).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
import urllib3

from tests.fakes.runpod import (
    CAPACITY_DETAIL,
    POD_STATUSES,
    RATE_LIMIT_POLICY,
    FakeConfigError,
    FakeRunPod,
    start_fake_runpod,
    validate_create_pod_request,
)
from tests.fakes.runpod_catalog import (
    AVAILABILITY_LEVELS,
    COMPLIANCE,
    DATA_CENTER_QUERY_PARAMETERS,
    GPU_QUERY_PARAMETERS,
    PRODUCTS,
    REGIONS,
    VOLUME_TYPES,
)
from tests.fakes.runpod_logs import LOG_PARAMETERS, LOG_SOURCES

REPO = Path(__file__).resolve().parents[2]
# RunPod's description lives in shared/ beside the clone (reference data, not committed here).
SPEC_PATH = Path(
    os.environ.get("RUNPOD_OPENAPI", Path(__file__).resolve().parents[3] / "shared" / "runpod" / "openapi-v2.json")
)
KEY = "test-key"
RTX = "NVIDIA GeForce RTX 4090"
H100 = "NVIDIA H100 80GB HBM3"
TEMPLATES: dict[str, dict[str, Any]] = {
    "tpl-renderer": {"image": "openalice/renderer:1.4", "ports": ["8080/http", "22/tcp"], "env": {"MODE": "render"}},
    "tpl-anim": {},
    "tpl-serverless": {"serverless": True},
}
POD_ID = re.compile(r"[a-z0-9]{10}")
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
POD_REQUIRED = frozenset(
    {"id", "name", "status", "actions", "image", "args", "disk", "mounts", "ports", "env", "registry", "cloud"}
    | {"dataCenterId", "cudaVersion", "ssh", "template", "cost", "locked", "runtime", "createdAt", "startedAt"}
    | {"globalNetworking"}
)
RATE_LIMIT = re.compile(r'"minute";r=\d+;t=\d+, "hour";r=\d+;t=\d+, "day";r=\d+;t=\d+')
A100 = "NVIDIA A100 80GB PCIe"
EVENT_ID = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)/(\d{12})")


def gpu_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "lease-1", "image": "runpod/pytorch:2.4", "gpu": {"id": RTX, "count": 1}}
    body.update(overrides)
    return body


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, TEMPLATES) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeRunPod) -> FakeRunPod:
    server.reset()
    return server


@pytest.fixture
def api(fake: FakeRunPod) -> Iterator[requests.Session]:
    """A client as the driver is: bearer key and its own User-Agent."""
    session = requests.Session()
    session.headers.update({"Authorization": f"Bearer {KEY}", "User-Agent": "fake-test/1.0"})
    yield session
    session.close()


class Spec:
    """RunPod's OpenAPI description, its schemas as jsonschema validators."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._jsonschema: Any = importlib.import_module("jsonschema")
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        self.document = document
        self._registry: Registry[Any] = Registry().with_resource(
            "urn:runpod-openapi", DRAFT202012.create_resource(document)
        )

    def validator(self, schema_name: str) -> Any:
        cls = self._jsonschema.Draft202012Validator
        schema = {"$ref": f"urn:runpod-openapi#/components/schemas/{schema_name}"}
        return cls(schema, registry=self._registry, format_checker=cls.FORMAT_CHECKER)

    def errors(self, schema_name: str, instance: object) -> list[str]:
        return [error.message for error in self.validator(schema_name).iter_errors(instance)]

    def properties(self, schema_name: str) -> set[str]:
        """Every property name a schema (through allOf and $ref) declares."""
        names: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if "$ref" in node:
                    walk(self.document["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]])
                names.update(node.get("properties", {}))
                for part in node.get("allOf", []):
                    walk(part)

        walk(self.document["components"]["schemas"][schema_name])
        return names


@pytest.fixture(scope="module")
def spec() -> Spec | None:
    """The description's schemas, or None without the file or jsonschema (then only the fixed checks run)."""
    if not SPEC_PATH.is_file() or importlib.util.find_spec("jsonschema") is None:
        return None
    return Spec(json.loads(SPEC_PATH.read_text()))


@pytest.fixture
def openapi(spec: Spec | None) -> Spec:
    """For the tests that are about the description itself."""
    if spec is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must check the fake against RunPod's OpenAPI description at {SPEC_PATH}")
        pytest.skip(f"needs jsonschema and RunPod's OpenAPI description at {SPEC_PATH} (or set RUNPOD_OPENAPI)")
    return spec


def assert_problem(response: requests.Response, status: int, spec: Spec | None = None) -> dict[str, Any]:
    """An RFC 9457 problem as RunPod's ErrorResponse: right status, content type and fields only."""
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    assert isinstance(problem["title"], str) and problem["title"]
    assert isinstance(problem["detail"], str) and problem["detail"]
    assert set(problem) <= {"title", "status", "detail", "errors"}
    if spec is not None:
        assert spec.errors("ErrorResponse", problem) == []
    return problem


def assert_pod(pod: dict[str, Any], spec: Spec | None) -> None:
    """A Pod by RunPod's schema, with no field the schema does not declare."""
    assert set(pod) >= POD_REQUIRED
    assert pod["status"] in POD_STATUSES
    if spec is not None:
        assert spec.errors("Pod", pod) == []
        assert set(pod) <= spec.properties("Pod")
    assert POD_ID.fullmatch(pod["id"])
    assert RFC3339_Z.fullmatch(pod["createdAt"])


def create(api: requests.Session, fake: FakeRunPod, **overrides: Any) -> dict[str, Any]:
    response = api.post(f"{fake.url}/v2/pods", json=gpu_body(**overrides))
    assert response.status_code == 201, response.text
    pod: dict[str, Any] = response.json()
    return pod


# --- the four operations -------------------------------------------------------------------------


def test_create_answers_201_with_a_provisioning_pod(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    response = api.post(f"{fake.url}/v2/pods", json=gpu_body(env={"LEASE_ID": "l-1"}, ports=["8888/http", "22/tcp"]))

    assert response.status_code == 201
    assert response.headers["Content-Type"] == "application/json"
    pod = response.json()
    assert_pod(pod, spec)
    assert pod["status"] == "PROVISIONING" and pod["actions"] == ["stop", "terminate"]
    assert pod["runtime"] is None and pod["startedAt"] is None and pod["ssh"]["direct"] is None
    assert pod["gpu"] == {"id": RTX, "count": 1} and "cpu" not in pod
    assert pod["cost"] == 0.69 and pod["env"] == {"LEASE_ID": "l-1"} and pod["template"] is None
    assert fake.pods[pod["id"]]["name"] == "lease-1"


def test_a_pod_runs_on_first_read_and_is_listed(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake, ports=["22/tcp"])

    got = api.get(f"{fake.url}/v2/pods/{pod['id']}")
    listed = api.get(f"{fake.url}/v2/pods")

    assert got.status_code == 200 and got.headers["Content-Type"] == "application/json"
    running = got.json()
    assert_pod(running, spec)
    assert running["status"] == "RUNNING" and running["actions"] == ["stop", "restart", "terminate"]
    assert RFC3339_Z.fullmatch(running["startedAt"]) and running["runtime"]["ports"][0]["private"] == 22
    assert running["ssh"]["direct"]["port"] == running["runtime"]["ports"][0]["public"]
    assert listed.status_code == 200
    if spec is not None:
        assert spec.errors("ListPodsResponse", listed.json()) == []
    assert [p["id"] for p in listed.json()["pods"]] == [pod["id"]]


def test_running_after_gets_passes_through_starting(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(running_after_gets=2)
    pod = create(api, fake)

    seen = [api.get(f"{fake.url}/v2/pods/{pod['id']}").json()["status"] for _ in range(4)]

    assert seen == ["PROVISIONING", "STARTING", "RUNNING", "RUNNING"]


def test_delete_answers_204_and_the_pod_is_gone(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)

    deleted = api.delete(f"{fake.url}/v2/pods/{pod['id']}")

    assert deleted.status_code == 204 and deleted.content == b""
    assert api.get(f"{fake.url}/v2/pods").json() == {"pods": []}
    assert_problem(api.get(f"{fake.url}/v2/pods/{pod['id']}"), 404, spec)
    assert_problem(api.delete(f"{fake.url}/v2/pods/{pod['id']}"), 404, spec)
    assert fake.pods == {} and fake.deleted_pod_ids == [pod["id"]]


def test_unknown_pod_is_404(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    assert assert_problem(api.get(f"{fake.url}/v2/pods/nosuchpod0"), 404, spec)["detail"] == "pod not found"
    assert_problem(api.delete(f"{fake.url}/v2/pods/nosuchpod0"), 404, spec)


def test_paths_and_methods(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    assert_problem(api.get(f"{fake.url}/v2/nothing"), 404, spec)
    assert_problem(api.get(f"{fake.url}/v1/pods"), 404, spec)
    put = api.put(f"{fake.url}/v2/pods", json={})
    assert assert_problem(put, 405, spec)["title"] == "Method Not Allowed" and put.headers["Allow"] == "GET, POST"
    post = api.post(f"{fake.url}/v2/pods/abc", json={})
    assert_problem(post, 405, spec)
    assert post.headers["Allow"] == "GET, PATCH, DELETE"
    # RunPod has these; the fake says plainly that it does not.
    assert_problem(api.patch(f"{fake.url}/v2/pods/abc", json={"name": "x"}), 501, spec)
    assert_problem(api.get(f"{fake.url}/v2/catalog/cpus"), 501, spec)


def test_allow_headers_name_the_methods_of_the_openapi(openapi: Spec) -> None:
    from tests.fakes.runpod import _SPEC_ROUTES

    documented = {
        path: ", ".join(m.upper() for m in item if m in {"get", "post", "put", "patch", "delete"})
        for path, item in openapi.document["paths"].items()
    }
    served = {pattern.pattern: ", ".join(methods) for pattern, methods in _SPEC_ROUTES}
    assert len(served) == len(documented)
    for path, methods in documented.items():
        regex = "^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"
        assert served[regex] == methods, path


# --- headers, auth, Cloudflare ------------------------------------------------------------------


def test_authenticated_answers_carry_rate_limit_headers(fake: FakeRunPod, api: requests.Session) -> None:
    for response in (api.get(f"{fake.url}/v2/pods"), api.get(f"{fake.url}/v2/pods/missing000")):
        assert response.headers["RateLimit-Policy"] == RATE_LIMIT_POLICY
        assert RATE_LIMIT.fullmatch(response.headers["RateLimit"])


def test_missing_or_wrong_bearer_token_is_401(fake: FakeRunPod, spec: Spec | None) -> None:
    url = f"{fake.url}/v2/pods"
    ua = {"User-Agent": "fake-test/1.0"}
    cases = [
        ({}, "missing bearer token"),
        ({"Authorization": f"Basic {KEY}"}, "missing bearer token"),
        ({"Authorization": "Bearer"}, "missing bearer token"),
        ({"Authorization": "Bearer nope"}, "invalid bearer token"),
    ]
    for headers, detail in cases:
        response = requests.get(url, headers=ua | headers, timeout=5)
        problem = assert_problem(response, 401, spec)
        assert problem == {"title": "Unauthorized", "status": 401, "detail": detail}
        assert "RateLimit" not in response.headers
    assert requests.post(url, headers=ua, json=gpu_body(), timeout=5).status_code == 401
    assert fake.pods == {}
    assert requests.get(url, headers=ua | {"Authorization": f"bearer {KEY}"}, timeout=5).status_code == 200


def test_no_user_agent_is_cloudflares_1010(fake: FakeRunPod) -> None:
    # urllib3 adds its own User-Agent when none is given; SKIP_HEADER really sends none.
    for headers in (
        {"User-Agent": urllib3.util.SKIP_HEADER, "Authorization": f"Bearer {KEY}"},
        {"User-Agent": urllib3.util.SKIP_HEADER},
    ):
        response = requests.get(f"{fake.url}/v2/pods", headers=headers, timeout=5)
        assert response.status_code == 403
        assert response.headers["Content-Type"].startswith("text/plain")
        assert response.text == "error code: 1010"
    assert fake.request_log[-1]["user_agent"] is None
    assert requests.get(f"{fake.url}/v2/pods", headers={"Authorization": f"Bearer {KEY}"}, timeout=5).ok


# --- create validation ---------------------------------------------------------------------------


def test_unknown_field_is_422_with_runpods_error(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    problem = assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body(bogus=1)), 422, spec)

    assert problem == {
        "title": "Unprocessable Entity",
        "status": 422,
        "detail": "Request validation failed.",
        "errors": ["$: additional properties 'bogus' not allowed"],
    }
    assert fake.pods == {}


def test_422_lists_every_violation(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    body = {
        "name": "",
        "gpu": {"id": RTX, "count": 0, "type": "x"},
        "env": {"OK": "1", "N": 5},
        "disk": "big",
        "ports": [8080],
        "cloud": "CHEAP",
        "startSsh": "yes",
    }
    errors = assert_problem(api.post(f"{fake.url}/v2/pods", json=body), 422, spec)["errors"]

    assert sorted(errors) == sorted(
        [
            "$: missing property 'image'",
            "$.name: minLength: got 0, want 1",
            "$.gpu: additional properties 'type' not allowed",
            "$.gpu.count: minimum: got 0, want 1",
            "$.env.N: got integer, want string",
            "$.disk: got string, want integer",
            "$.ports[0]: got integer, want string",
            "$.cloud: value must be one of 'SECURE', 'COMMUNITY'",
            "$.startSsh: got string, want boolean",
        ]
    )


def test_body_must_be_a_json_object(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    url = f"{fake.url}/v2/pods"
    assert assert_problem(api.post(url, json=[1]), 422, spec)["errors"] == ["$: got array, want object"]
    assert_problem(api.post(url, data=b"{not json", headers={"Content-Type": "application/json"}), 400, spec)
    assert_problem(api.post(url), 400, spec)
    assert fake.request_log[-2]["body"] == "{not json"


# Bodies the fake must judge exactly as the CreatePodRequest schema does (valid → not 422).
AGREEMENT_BODIES: list[dict[str, Any] | list[Any] | str] = [
    gpu_body(),
    gpu_body(gpu={"id": RTX}),
    gpu_body(gpu={"id": RTX, "count": 2.0}),
    gpu_body(gpu={"id": RTX, "count": True}),
    gpu_body(gpu={"id": RTX, "count": 1.5}),
    gpu_body(gpu={"id": RTX, "count": 0}),
    gpu_body(gpu={"count": 1}),
    gpu_body(gpu={"id": RTX, "allowedCudaVersions": ["12.8", "12.6"]}),
    gpu_body(gpu={"id": RTX, "allowedCudaVersions": ["12"]}),
    gpu_body(gpu={"id": RTX, "minCudaVersion": "12.x"}),
    gpu_body(gpu={"id": RTX, "minCudaVersion": "12.4"}),
    gpu_body(gpu="RTX"),
    gpu_body(name=""),
    gpu_body(name=7),
    {"name": "x", "gpu": {"id": RTX}},
    {"name": "x", "templateId": "tpl-anim", "gpu": {"id": RTX}},
    {"name": "x", "templateId": "", "gpu": {"id": RTX}},
    {"image": "x", "gpu": {"id": RTX}},
    gpu_body(env={"A": "1"}),
    gpu_body(env={"A": None}),
    gpu_body(env=[]),
    gpu_body(registry=None),
    gpu_body(registry=3),
    gpu_body(disk=0),
    gpu_body(disk=20),
    gpu_body(args=["a"]),
    gpu_body(cloud="COMMUNITY"),
    gpu_body(cloud="secure"),
    gpu_body(dataCenterIds=["EU-RO-1"]),
    gpu_body(dataCenterIds="EU-RO-1"),
    gpu_body(globalNetworking=1),
    gpu_body(startJupyter=True, startSsh=False),
    gpu_body(mounts={"persistent": {"size": 20, "path": "/workspace"}}),
    gpu_body(mounts={"persistent": {"size": 5, "path": "/workspace"}}),
    gpu_body(mounts={"persistent": {"size": 20}}),
    gpu_body(mounts={"network": [{"volumeId": "v", "path": "/runpod-volume"}]}),
    gpu_body(mounts={"network": [{"volumeId": "v", "path": "/a"}, {"volumeId": "w", "path": "/b"}]}),
    gpu_body(mounts={"network": [{"volumeId": "v", "path": "/a", "size": 1}]}),
    gpu_body(mounts={"ephemeral": {}}),
    {"name": "c", "image": "x", "cpu": {"id": "cpu5c", "vcpuCount": 4}},
    {"name": "c", "image": "x", "cpu": {"id": "cpu5c", "vcpuCount": 1}},
    {"name": "c", "image": "x", "cpu": {"id": "", "vcpuCount": 4}},
    {"name": "c", "image": "x", "cpu": {"id": "cpu5c"}},
    {"name": "c", "image": "x", "cpu": {"id": "cpu5c", "vcpuCount": 4, "memory": 16}},
    gpu_body(bogus=1, other=2),
    [gpu_body()],
    "pod",
]


@pytest.mark.parametrize("body", AGREEMENT_BODIES, ids=lambda b: json.dumps(b)[:70])
def test_validation_agrees_with_the_create_pod_request_schema(
    body: dict[str, Any] | list[Any] | str, openapi: Spec
) -> None:
    schema_errors = openapi.errors("CreatePodRequest", body)
    fake_errors = validate_create_pod_request(body)
    assert bool(fake_errors) == bool(schema_errors), (fake_errors, schema_errors)


def test_cross_field_rules_are_400(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    cpu = {"id": "cpu5c", "vcpuCount": 4}
    bodies = [
        {"name": "x", "image": "y"},  # neither gpu nor cpu
        gpu_body(cpu=cpu),  # both
        gpu_body(gpu={"id": RTX, "allowedCudaVersions": ["12.8"], "minCudaVersion": "12.4"}),
        gpu_body(mounts={"persistent": {"size": 20, "path": "/w"}, "network": [{"volumeId": "v", "path": "/n"}]}),
        {"name": "x", "image": "y", "cpu": cpu, "mounts": {"persistent": {"size": 20, "path": "/w"}}},
        {"name": "x", "image": "y", "cpu": {"id": "cpu5c", "vcpuCount": 6}},
        gpu_body(ports=["http"]),
    ]
    for body in bodies:
        if spec is not None:  # the contract holds: these break a rule, not the schema
            assert spec.errors("CreatePodRequest", body) == [], body
        problem = assert_problem(api.post(f"{fake.url}/v2/pods", json=body), 400, spec)
        assert problem["detail"] != CAPACITY_DETAIL
    assert fake.pods == {}
    # An explicit empty set states no constraint and may accompany a floor.
    create(api, fake, gpu={"id": RTX, "allowedCudaVersions": [], "minCudaVersion": "12.4"})


def test_a_cpu_pod(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    body = {"name": "c", "image": "x", "cpu": {"id": "cpu5c", "vcpuCount": 4}}
    response = api.post(f"{fake.url}/v2/pods", json=body)

    assert response.status_code == 201
    pod = response.json()
    assert_pod(pod, spec)
    assert pod["cpu"] == {"id": "cpu5c", "vcpuCount": 4, "memory": 16} and "gpu" not in pod
    assert pod["cudaVersion"] is None


# --- templates -----------------------------------------------------------------------------------


def test_a_template_supplies_image_ports_and_env(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    body = {"name": "lease-2", "templateId": "tpl-renderer", "gpu": {"id": H100}, "env": {"LEASE_ID": "l-2"}}
    pod = api.post(f"{fake.url}/v2/pods", json=body).json()

    assert_pod(pod, spec)
    assert pod["image"] == "openalice/renderer:1.4" and pod["ports"] == ["8080/http", "22/tcp"]
    assert pod["env"] == {"MODE": "render", "LEASE_ID": "l-2"}
    assert pod["template"] is None  # "the created pod does not retain a link to the template"
    assert pod["cost"] == 2.99

    defaults = create(api, fake, templateId="tpl-anim", image="mine:1", env={"MODE": "x"})
    assert defaults["image"] == "mine:1" and defaults["ports"] == ["8080/http"] and defaults["env"] == {"MODE": "x"}


def test_unknown_template_is_404(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    body = {"name": "x", "templateId": "tpl-nope", "gpu": {"id": RTX}}
    assert "tpl-nope" in assert_problem(api.post(f"{fake.url}/v2/pods", json=body), 404, spec)["detail"]


def test_a_serverless_template_is_422(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    body = {"name": "x", "templateId": "tpl-serverless", "gpu": {"id": RTX}}
    assert assert_problem(api.post(f"{fake.url}/v2/pods", json=body), 422, spec)["errors"]


def test_start_jupyter_injects_a_password_unless_set(fake: FakeRunPod, api: requests.Session) -> None:
    assert create(api, fake, startJupyter=True)["env"]["JUPYTER_PASSWORD"]
    assert create(api, fake, startJupyter=True, env={"JUPYTER_PASSWORD": "p"})["env"] == {"JUPYTER_PASSWORD": "p"}


# --- prices --------------------------------------------------------------------------------------


def test_cost_comes_from_the_price_table(fake: FakeRunPod, api: requests.Session) -> None:
    assert create(api, fake, gpu={"id": "NVIDIA A100 80GB PCIe", "count": 2})["cost"] == 3.28
    assert create(api, fake, gpu={"id": "Unknown GPU"})["cost"] == 0.5
    fake.configure(gpu_prices={RTX: 0.44})
    assert create(api, fake)["cost"] == 0.44


# --- failure switches ----------------------------------------------------------------------------


def test_no_capacity_is_400_with_runpods_detail(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(no_capacity_gpu_ids=[RTX])

    problem = assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body()), 400, spec)

    assert problem == {"title": "Bad Request", "status": 400, "detail": CAPACITY_DETAIL}
    assert fake.pods == {}
    create(api, fake, gpu={"id": H100})


def test_forbidden_gpu_is_403(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(forbidden_gpu_ids={H100})
    problem = assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body(gpu={"id": H100})), 403, spec)
    assert problem["detail"] == "access denied"
    create(api, fake)


def test_insufficient_balance_is_402(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(insufficient_balance=True)
    problem = assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body()), 402, spec)
    assert problem == {
        "title": "Payment Required",
        "status": 402,
        "detail": "insufficient balance: add funds to continue",
    }
    assert fake.pods == {}


def test_rate_limit_next_answers_429_with_retry_after(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(rate_limit_next=2, rate_limit_retry_after=7)

    first = api.get(f"{fake.url}/v2/pods")
    second = api.post(f"{fake.url}/v2/pods", json=gpu_body())
    third = api.get(f"{fake.url}/v2/pods")

    for response in (first, second):
        assert assert_problem(response, 429, spec)["title"] == "Too Many Requests"
        assert response.headers["Retry-After"] == "7"
        assert response.headers["RateLimit"].startswith('"minute";r=0;t=7')
    assert third.status_code == 200 and fake.pods == {}


def test_rate_limit_next_creates_spares_reads(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(rate_limit_next_creates=1)

    assert api.get(f"{fake.url}/v2/pods").status_code == 200
    limited = api.post(f"{fake.url}/v2/pods", json=gpu_body())
    assert_problem(limited, 429, spec)
    assert limited.headers["Retry-After"] == "1"
    create(api, fake)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_fail_next_creates_creates_nothing(
    status: int, fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(fail_next_creates=2, fail_status=status)

    for _ in range(2):
        assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body()), status, spec)

    assert fake.pods == {}
    create(api, fake)


def test_create_500_but_running_makes_the_pod(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(create_500_but_running=1)

    assert_problem(api.post(f"{fake.url}/v2/pods", json=gpu_body(name="lease-9")), 500, spec)

    pods = api.get(f"{fake.url}/v2/pods").json()["pods"]
    assert [(p["name"], p["status"]) for p in pods] == [("lease-9", "RUNNING")]
    assert_pod(pods[0], spec)


def test_a_slow_create_still_makes_the_pod(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(slow_creates_seconds=0.6)

    with pytest.raises(requests.ReadTimeout):
        api.post(f"{fake.url}/v2/pods", json=gpu_body(name="lease-slow"), timeout=0.15)

    assert [p["name"] for p in fake.pods.values()] == ["lease-slow"]
    started = time.monotonic()
    assert api.get(f"{fake.url}/v2/pods", timeout=2).status_code == 200  # only creates are slow
    assert time.monotonic() - started < 0.5


def test_slow_seconds_delays_every_answer(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(slow_seconds=0.2)
    started = time.monotonic()
    assert api.get(f"{fake.url}/v2/pods").status_code == 200
    assert time.monotonic() - started >= 0.2


def test_delete_answers_404_but_deletes(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)
    fake.configure(delete_answers_404=1)

    assert_problem(api.delete(f"{fake.url}/v2/pods/{pod['id']}"), 404, spec)

    assert fake.pods == {}
    assert api.get(f"{fake.url}/v2/pods/{pod['id']}").status_code == 404


def test_delete_lag_reads(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)
    fake.configure(delete_lag_reads=2)
    assert api.delete(f"{fake.url}/v2/pods/{pod['id']}").status_code == 204

    reads = [api.get(f"{fake.url}/v2/pods/{pod['id']}") for _ in range(4)]

    assert [r.status_code for r in reads] == [200, 200, 200, 404]
    shown = [r.json() for r in reads[:3]]
    assert [p["status"] for p in shown] == ["RUNNING", "RUNNING", "TERMINATED"]
    for shown_pod in shown:
        assert_pod(shown_pod, spec)
    assert shown[2]["cost"] == 0.0 and shown[2]["actions"] == [] and shown[2]["runtime"] is None
    assert api.get(f"{fake.url}/v2/pods").json() == {"pods": []}


def test_fail_next_deletes_keeps_the_pod(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)
    fake.configure(fail_next_deletes=1, fail_status=502)

    assert_problem(api.delete(f"{fake.url}/v2/pods/{pod['id']}"), 502, spec)
    assert pod["id"] in fake.pods
    assert api.delete(f"{fake.url}/v2/pods/{pod['id']}").status_code == 204


def test_fail_next_lists_and_gets(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)
    fake.configure(fail_next_lists=1, fail_next_gets=1)

    assert_problem(api.get(f"{fake.url}/v2/pods"), 503, spec)
    assert_problem(api.get(f"{fake.url}/v2/pods/{pod['id']}"), 503, spec)
    assert api.get(f"{fake.url}/v2/pods").status_code == 200
    assert api.get(f"{fake.url}/v2/pods/{pod['id']}").status_code == 200


def test_set_pod_status(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod = create(api, fake)
    fake.set_pod_status(pod["id"], "EXITED")

    exited = api.get(f"{fake.url}/v2/pods/{pod['id']}").json()

    assert_pod(exited, spec)
    assert exited["status"] == "EXITED" and exited["cost"] == 0.0 and exited["actions"] == ["start", "terminate"]


def test_configure_rejects_unknown_or_bad_switches(fake: FakeRunPod) -> None:
    with pytest.raises(FakeConfigError) as caught:
        fake.configure(fail_next_create=1, fail_status=418, rate_limit_next=-1)
    assert len(caught.value.errors) == 3
    assert fake.config.fail_status == 503 and fake.config.rate_limit_next == 0


# --- control over HTTP and the request log --------------------------------------------------------


def test_control_over_http(fake: FakeRunPod, api: requests.Session) -> None:
    control = requests.Session()  # no key, no custom User-Agent needed
    configured = control.post(
        f"{fake.url}/_fake/config", json={"no_capacity_gpu_ids": [RTX], "fail_next_lists": 1}, timeout=5
    )
    assert configured.status_code == 200
    assert configured.json()["config"]["no_capacity_gpu_ids"] == [RTX]
    assert api.post(f"{fake.url}/v2/pods", json=gpu_body()).status_code == 400
    pod = create(api, fake, gpu={"id": H100})

    state = control.get(f"{fake.url}/_fake/state", timeout=5).json()
    assert [p["id"] for p in state["pods"]] == [pod["id"]]
    assert [(r["method"], r["path"], r["status"]) for r in state["requests"]] == [
        ("POST", "/v2/pods", 400),
        ("POST", "/v2/pods", 201),
    ]
    assert state["config"]["fail_next_lists"] == 1

    status = control.post(f"{fake.url}/_fake/pods/{pod['id']}/status", json={"status": "ERROR"}, timeout=5)
    assert status.status_code == 200 and status.json()["status"] == "ERROR"

    bad = control.post(f"{fake.url}/_fake/config", json={"nope": 1}, timeout=5)
    assert bad.status_code == 400 and bad.json()["errors"] == ["unknown setting 'nope'"]
    assert control.get(f"{fake.url}/_fake/config", timeout=5).status_code == 405

    assert control.post(f"{fake.url}/_fake/reset", timeout=5).status_code == 204
    assert fake.pods == {} and fake.request_log == [] and fake.config.fail_next_lists == 0
    assert "tpl-renderer" in fake.templates  # templates survive a reset


def test_the_request_log(fake: FakeRunPod, api: requests.Session) -> None:
    create(api, fake, env={"K": "v"})
    requests.get(f"{fake.url}/v2/pods?includeClusterPods=true", timeout=5)

    created, anonymous = fake.request_log
    assert created["method"] == "POST" and created["path"] == "/v2/pods" and created["status"] == 201
    assert created["user_agent"] == "fake-test/1.0" and created["has_authorization"] and created["authorized"]
    assert created["body"]["env"] == {"K": "v"} and created["content_type"] == "application/json"
    assert anonymous["query"] == "includeClusterPods=true" and anonymous["status"] == 401
    assert not anonymous["has_authorization"] and str(anonymous["user_agent"]).startswith("python-requests/")
    assert fake.requests_to("POST", "/v2/pods") == [created]


# --- lifecycle by time (readiness) ----------------------------------------------------------------


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_a_timed_pod_provisions_then_starts_then_runs_by_time_not_reads(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(provisioning_seconds=30, starting_seconds=20)
    pod = create(api, fake, ports=["8080/http", "22/tcp"])
    url = f"{fake.url}/v2/pods/{pod['id']}"

    provisioning = [api.get(url).json() for _ in range(3)]
    fake.age_pods(30)
    starting = api.get(url).json()
    fake.age_pods(20)
    running = api.get(url).json()

    for shown in [*provisioning, starting, running]:
        assert_pod(shown, spec)
        assert shown["cost"] == 0.69  # billed from create on
    assert [p["status"] for p in provisioning] == ["PROVISIONING"] * 3  # reads do not move a timed pod
    assert provisioning[0]["runtime"] is None and provisioning[0]["startedAt"] is None
    assert starting["status"] == "STARTING" and starting["runtime"] is None and starting["startedAt"] is None
    assert starting["actions"] == ["stop", "terminate"]
    assert running["status"] == "RUNNING"
    assert {"private": 8080, "public": None, "type": "http", "ip": None} in running["runtime"]["ports"]
    assert _when(running["startedAt"]) - _when(running["createdAt"]) == timedelta(seconds=50)


def test_a_timed_pod_runs_on_the_clock_with_nobody_aging_it(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(provisioning_seconds=0.3, starting_seconds=0.3)
    started = time.monotonic()
    pod = create(api, fake)
    seen: list[str] = []
    while time.monotonic() - started < 20 and (not seen or seen[-1] != "RUNNING"):
        status = fake.pods[pod["id"]]["status"]  # no reads at all: the clock moves it
        if not seen or seen[-1] != status:
            seen.append(status)
        time.sleep(0.05)

    assert seen[-1] == "RUNNING" and time.monotonic() - started >= 0.6
    assert [s for s in ("PROVISIONING", "STARTING", "RUNNING") if s in seen] == seen


def test_a_timed_pod_ignores_running_after_gets(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(running_after_gets=0, provisioning_seconds=60)
    pod = create(api, fake)
    assert api.get(f"{fake.url}/v2/pods/{pod['id']}").json()["status"] == "PROVISIONING"


def test_fail_boot_gpu_pod_ends_in_error_and_keeps_billing(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(fail_boot_gpu_ids=[RTX])
    failing, healthy = create(api, fake), create(api, fake, gpu={"id": H100})

    crashed = api.get(f"{fake.url}/v2/pods/{failing['id']}").json()

    assert_pod(crashed, spec)
    assert crashed["status"] == "ERROR" and crashed["actions"] == ["start", "terminate"]
    assert crashed["runtime"] is None and crashed["cost"] == 0.69
    assert api.get(f"{fake.url}/v2/pods/{healthy['id']}").json()["status"] == "RUNNING"
    assert [p["status"] for p in api.get(f"{fake.url}/v2/pods").json()["pods"]] == ["ERROR", "RUNNING"]
    assert fake.pod_logs(failing["id"])[-1]["line"] == "Container exited with code 1; pod status ERROR"


def test_fail_boot_next_fails_only_the_next_pods(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(fail_boot_next=1, running_after_gets=1)
    first, second = create(api, fake), create(api, fake)

    reads = [[api.get(f"{fake.url}/v2/pods/{p['id']}").json()["status"] for _ in range(3)] for p in (first, second)]

    assert reads == [["STARTING", "ERROR", "ERROR"], ["STARTING", "RUNNING", "RUNNING"]]
    assert fake.config.fail_boot_next == 0


def test_a_template_that_fails_boot_errors_when_it_would_have_run(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(provisioning_seconds=100, starting_seconds=100, fail_boot_template_ids=["tpl-anim"])
    pod = create(api, fake, templateId="tpl-anim")

    statuses = []
    for seconds in (0, 150, 100):
        statuses.append(fake.age_pods(seconds, pod["id"])[0]["status"])

    assert statuses == ["PROVISIONING", "STARTING", "ERROR"]
    assert fake.pods[pod["id"]]["startedAt"] is None


def test_fail_boot_after_seconds_errors_a_starting_pod_later(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(fail_boot_gpu_ids=[RTX], fail_boot_after_seconds=1000)
    pod = create(api, fake)
    url = f"{fake.url}/v2/pods/{pod['id']}"

    early = [api.get(url).json()["status"] for _ in range(3)]
    fake.age_pods(900)
    before = api.get(url).json()["status"]
    fake.age_pods(100)
    after = api.get(url).json()

    assert early == ["STARTING"] * 3 and before == "STARTING"  # never RUNNING: the container keeps failing
    assert after["status"] == "ERROR" and after["cost"] == 0.69
    error_line = fake.pod_logs(pod["id"])[-1]
    assert _when(error_line["ts"]) - _when(after["createdAt"]) == timedelta(seconds=1000)


def test_stuck_starting_pods_never_run_and_keep_billing(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(provisioning_seconds=5, starting_seconds=5, stuck_starting_gpu_ids=[H100])
    pod = create(api, fake, gpu={"id": H100, "count": 2})

    stuck = fake.age_pods(86400, pod["id"])[0]

    assert stuck["status"] == "STARTING" and stuck["runtime"] is None and stuck["cost"] == 5.98
    assert api.get(f"{fake.url}/v2/pods/{pod['id']}").json()["status"] == "STARTING"


def test_stuck_starting_next_holds_a_read_moved_pod_in_starting(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(stuck_starting_next=1)
    stuck, fine = create(api, fake), create(api, fake)
    assert [api.get(f"{fake.url}/v2/pods/{stuck['id']}").json()["status"] for _ in range(3)] == ["STARTING"] * 3
    assert api.get(f"{fake.url}/v2/pods/{fine['id']}").json()["status"] == "RUNNING"


def test_an_exited_pod_stops_billing_and_says_so_in_its_log(fake: FakeRunPod, api: requests.Session) -> None:
    pod = create(api, fake)
    api.get(f"{fake.url}/v2/pods/{pod['id']}")

    exited = fake.set_pod_status(pod["id"], "EXITED")

    assert exited["cost"] == 0.0 and exited["runtime"] is None
    assert fake.pod_logs(pod["id"])[-1]["line"] == "Container exited; pod status EXITED"


def test_age_over_http(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(provisioning_seconds=100)
    pod = create(api, fake)
    control = requests.Session()

    aged = control.post(f"{fake.url}/_fake/age", json={"seconds": 100, "podId": pod["id"]}, timeout=5)

    assert aged.status_code == 200 and [p["status"] for p in aged.json()["pods"]] == ["RUNNING"]
    assert control.post(f"{fake.url}/_fake/age", json={"seconds": -1}, timeout=5).status_code == 400
    assert control.post(f"{fake.url}/_fake/age", json={"seconds": 1, "podId": "nope"}, timeout=5).status_code == 404
    assert fake.request_log == [fake.request_log[0]]  # control paths are not logged


# --- catalog and placement (cost) -----------------------------------------------------------------


def test_the_gpu_catalog_follows_the_list_gpu_types_schema(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(community_gpu_prices={RTX: 0.31})

    response = api.get(f"{fake.url}/v2/catalog/gpus")

    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    assert response.headers["RateLimit-Policy"] == RATE_LIMIT_POLICY
    gpus = {gpu["id"]: gpu for gpu in response.json()["gpus"]}
    assert list(gpus) == [RTX, A100, H100]
    assert gpus[RTX]["price"] == {"secure": 0.69, "community": 0.31}
    assert gpus[H100]["price"] == {"secure": 2.99, "community": 2.99}  # community defaults to the secure price
    assert gpus[RTX]["name"] == "RTX 4090" and gpus[RTX]["memory"] == 24 and gpus[RTX]["manufacturer"] == "NVIDIA"
    assert "availability" not in gpus[RTX] and "dataCenters" not in gpus[RTX]
    if spec is not None:
        assert spec.errors("ListGpuTypesResponse", response.json()) == []
        for gpu in gpus.values():
            assert set(gpu) <= spec.properties("GpuType")


def test_catalog_prices_follow_gpu_prices(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(gpu_prices={RTX: 0.44, "NVIDIA L4": 0.39})
    gpus = {gpu["id"]: gpu for gpu in api.get(f"{fake.url}/v2/catalog/gpus").json()["gpus"]}
    assert gpus[RTX]["price"]["secure"] == 0.44 and gpus["NVIDIA L4"]["price"]["secure"] == 0.39
    assert gpus[A100]["price"]["secure"] == 0.5  # stocked but unpriced: default_gpu_price


def test_a_gpu_type_by_id(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    response = api.get(f"{fake.url}/v2/catalog/gpus/{quote(H100)}")

    assert response.status_code == 200
    gpu = response.json()
    assert gpu["id"] == H100 and gpu["price"]["secure"] == 2.99 and gpu["maxCount"]["secure"] >= 1
    if spec is not None:
        assert spec.errors("GpuType", gpu) == []
    unknown = assert_problem(api.get(f"{fake.url}/v2/catalog/gpus/NVIDIA%20Nothing"), 404, spec)
    assert unknown["detail"] == "GPU type not found"


def test_gpu_availability_comes_from_the_data_centers(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(data_centers={"US-KS-2": {RTX: "LOW", H100: "NONE"}, "EU-RO-1": {RTX: "HIGH", H100: "NONE"}})

    response = api.get(f"{fake.url}/v2/catalog/gpus", params={"include": "AVAILABILITY", "product": "POD"})

    gpus = {gpu["id"]: gpu for gpu in response.json()["gpus"]}
    assert gpus[RTX]["availability"] == "HIGH"
    assert gpus[RTX]["dataCenters"] == [
        {"id": "US-KS-2", "name": "US Kansas 2", "availability": "LOW"},
        {"id": "EU-RO-1", "name": "EU Romania 1", "availability": "HIGH"},
    ]
    assert gpus[RTX]["cudaVersions"][-1] == {"version": "12.8", "available": True}
    assert gpus[H100]["availability"] == "NONE" and "dataCenters" not in gpus[H100]
    assert gpus[A100]["availability"] == "NONE"  # priced, stocked nowhere
    if spec is not None:
        assert spec.errors("ListGpuTypesResponse", response.json()) == []


def test_gpu_availability_filters(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    url = f"{fake.url}/v2/catalog/gpus"
    base = {"include": "AVAILABILITY", "product": "POD"}

    romania = api.get(url, params=base | {"countryCodes": "RO"}).json()["gpus"]
    h100_in_romania = api.get(f"{url}/{quote(H100)}", params=base | {"countryCodes": "RO"}).json()
    too_many = api.get(f"{url}/{quote(RTX)}", params=base | {"count": 5, "cloud": "COMMUNITY"}).json()
    cuda = api.get(f"{url}/{quote(RTX)}", params=base | {"minCudaVersion": "12.6"}).json()
    no_cuda = api.get(f"{url}/{quote(RTX)}", params=base | {"cudaVersions": "11.8"}).json()

    assert [gpu["id"] for gpu in romania] == [RTX, A100]  # the list drops types with no data center there
    assert [dc["id"] for dc in romania[0]["dataCenters"]] == ["EU-RO-1"]
    assert h100_in_romania["availability"] == "NONE" and "dataCenters" not in h100_in_romania
    assert too_many["availability"] == "NONE"  # above maxCount.community
    assert [v["version"] for v in cuda["cudaVersions"]] == ["12.6", "12.8"] and cuda["availability"] == "HIGH"
    assert no_cuda["availability"] == "NONE" and "cudaVersions" not in no_cuda
    if spec is not None:
        for gpu in (h100_in_romania, too_many, cuda, no_cuda):
            assert spec.errors("GpuType", gpu) == []


def test_gpu_catalog_parameters_are_checked_as_documented(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    url = f"{fake.url}/v2/catalog/gpus"
    rules: list[dict[str, Any]] = [
        {"include": "AVAILABILITY"},  # product is required with it
        {"product": "POD"},  # and valid only with it
        {"count": 2},
        {"countryCodes": "FR"},
        {"include": "AVAILABILITY", "product": "POD", "cudaVersions": "12.8", "minCudaVersion": "12"},
    ]
    malformed: list[dict[str, Any]] = [
        {"include": "PRICES"},
        {"include": "AVAILABILITY", "product": "SPOT"},
        {"include": "AVAILABILITY", "product": "POD", "countryCodes": "fr"},
        {"include": "AVAILABILITY", "product": "POD", "count": 0},
        {"include": "AVAILABILITY", "product": "POD", "cudaVersions": "12"},
    ]
    for params in rules:
        assert_problem(api.get(url, params=params), 400, spec)
    for params in malformed:
        problem = assert_problem(api.get(url, params=params), 422, spec)
        assert problem["detail"] == "Request validation failed." and len(problem["errors"]) == 1


def test_the_data_center_catalog_follows_its_schema(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    url = f"{fake.url}/v2/catalog/datacenters"

    everything = api.get(url)
    europe = api.get(url, params={"regions": "EUROPE", "include": "GPU_AVAILABILITY"}).json()["dataCenters"]
    high_performance = api.get(url, params={"networkVolumeTypes": "HIGH_PERFORMANCE", "globalNetwork": "true"})
    one = api.get(f"{url}/US-TX-3", params={"include": "GPU_AVAILABILITY,CPU_AVAILABILITY"})

    assert everything.status_code == 200
    assert [dc["id"] for dc in everything.json()["dataCenters"]] == ["US-KS-2", "US-TX-3", "EU-RO-1", "EU-SE-1"]
    assert "gpuAvailability" not in everything.json()["dataCenters"][0]
    assert [dc["id"] for dc in europe] == ["EU-RO-1", "EU-SE-1"]
    assert europe[0]["gpuAvailability"] == [
        {"id": RTX, "name": "RTX 4090", "availability": "HIGH"},
        {"id": A100, "name": "A100 PCIe", "availability": "LOW"},
    ]
    assert [dc["id"] for dc in high_performance.json()["dataCenters"]] == ["US-KS-2"]
    assert one.json()["region"] == "NORTH_AMERICA" and one.json()["cpuAvailability"]
    if spec is not None:
        assert spec.errors("ListDataCentersResponse", everything.json()) == []
        assert spec.errors("ListDataCentersResponse", {"dataCenters": europe}) == []
        assert spec.errors("DataCenter", one.json()) == []
        assert set(one.json()) <= spec.properties("DataCenter")
    assert_problem(api.get(url, params={"regions": "MARS"}), 422, spec)
    assert_problem(api.get(url, params={"globalNetwork": "yes"}), 422, spec)
    assert assert_problem(api.get(f"{url}/XX-NO-1"), 404, spec)["detail"] == "data center not found"


def test_configured_data_centers_make_the_catalog(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(data_centers={"EU-FR-1": [RTX], "CA-MTL-1": {H100: "LOW"}})

    shown = api.get(f"{fake.url}/v2/catalog/datacenters", params={"include": "GPU_AVAILABILITY"}).json()

    assert [(dc["id"], dc["region"]) for dc in shown["dataCenters"]] == [
        ("EU-FR-1", "EUROPE"),
        ("CA-MTL-1", "NORTH_AMERICA"),
    ]
    assert shown["dataCenters"][0]["gpuAvailability"][0]["availability"] == "HIGH"
    if spec is not None:
        assert spec.errors("ListDataCentersResponse", shown) == []


def test_created_pod_costs_the_catalog_price_times_its_gpus(fake: FakeRunPod, api: requests.Session) -> None:
    catalog = {gpu["id"]: gpu for gpu in api.get(f"{fake.url}/v2/catalog/gpus").json()["gpus"]}
    fake.configure(community_gpu_prices={H100: 2.19})

    secure = create(api, fake, gpu={"id": H100, "count": 2})
    community = create(api, fake, gpu={"id": H100, "count": 2}, cloud="COMMUNITY")

    assert secure["cost"] == round(catalog[H100]["price"]["secure"] * 2, 4) == 5.98
    assert community["cost"] == 4.38


def test_cost_markup_bills_more_than_the_catalog_says(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(cost_markup=1.5)
    listed = api.get(f"{fake.url}/v2/catalog/gpus/{quote(RTX)}").json()["price"]["secure"]

    pod = create(api, fake)

    assert listed == 0.69 and pod["cost"] == 1.035
    assert api.get(f"{fake.url}/v2/pods/{pod['id']}").json()["cost"] == 1.035


def test_data_center_ids_restrict_placement(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    anywhere = create(api, fake)
    second_choice = create(api, fake, dataCenterIds=["EU-SE-1", "US-TX-3", "EU-RO-1"])  # EU-SE-1 has no 4090
    in_order = create(api, fake, dataCenterIds=["EU-RO-1", "US-TX-3"])
    refused = api.post(f"{fake.url}/v2/pods", json=gpu_body(dataCenterIds=["EU-SE-1"]))
    unknown = api.post(f"{fake.url}/v2/pods", json=gpu_body(dataCenterIds=["XX-NO-1"]))

    assert anywhere["dataCenterId"] == "US-KS-2"
    assert second_choice["dataCenterId"] == "US-TX-3" and in_order["dataCenterId"] == "EU-RO-1"
    for response in (refused, unknown):
        assert assert_problem(response, 400, spec) == {"title": "Bad Request", "status": 400, "detail": CAPACITY_DETAIL}
    assert len(fake.pods) == 3


def test_a_data_center_that_is_full_places_nothing(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(data_centers={"US-KS-2": {RTX: "NONE"}, "EU-RO-1": {RTX: "LOW"}})

    full = api.post(f"{fake.url}/v2/pods", json=gpu_body(dataCenterIds=["US-KS-2"]))
    elsewhere = create(api, fake)

    assert assert_problem(full, 400, spec)["detail"] == CAPACITY_DETAIL
    assert elsewhere["dataCenterId"] == "EU-RO-1"


def test_more_gpus_than_max_count_is_no_capacity(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    max_community = api.get(f"{fake.url}/v2/catalog/gpus/{quote(RTX)}").json()["maxCount"]["community"]
    body = gpu_body(gpu={"id": RTX, "count": max_community + 1}, cloud="COMMUNITY")
    assert assert_problem(api.post(f"{fake.url}/v2/pods", json=body), 400, spec)["detail"] == CAPACITY_DETAIL


def test_types_no_data_center_lists_place_as_before(fake: FakeRunPod, api: requests.Session) -> None:
    assert create(api, fake, gpu={"id": "NVIDIA H100 PCIe"})["dataCenterId"] == "US-KS-2"
    assert create(api, fake, gpu={"id": "NVIDIA H100 PCIe"}, dataCenterIds=["EU-SE-1"])["dataCenterId"] == "EU-SE-1"
    cpu = api.post(f"{fake.url}/v2/pods", json={"name": "c", "image": "x", "cpu": {"id": "cpu5c", "vcpuCount": 2}})
    assert cpu.json()["dataCenterId"] == "US-KS-2"


def test_the_catalog_speaks_the_descriptions_parameters_and_enums(openapi: Spec) -> None:
    def parameter_names(path: str) -> set[str]:
        names = set()
        for parameter in openapi.document["paths"][path]["get"]["parameters"]:
            if "$ref" in parameter:
                parameter = openapi.document["components"]["parameters"][parameter["$ref"].rsplit("/", 1)[1]]
            names.add(parameter["name"])
        return names

    schemas = openapi.document["components"]["schemas"]
    assert parameter_names("/v2/catalog/gpus") == set(GPU_QUERY_PARAMETERS)
    assert parameter_names("/v2/catalog/gpus/{id}") == set(GPU_QUERY_PARAMETERS)
    assert parameter_names("/v2/catalog/datacenters") == set(DATA_CENTER_QUERY_PARAMETERS)
    assert parameter_names("/v2/pods/{id}/logs") == set(LOG_PARAMETERS)
    for ours, name in [
        (AVAILABILITY_LEVELS, "AvailabilityLevel"),
        (PRODUCTS, "Product"),
        (REGIONS, "DataCenterRegion"),
        (VOLUME_TYPES, "VolumeType"),
        (COMPLIANCE, "Compliance"),
        (LOG_SOURCES, "LogSource"),
    ]:
        assert tuple(ours) == tuple(schemas[name]["enum"]), name


# --- quota (scale) --------------------------------------------------------------------------------


def _policy_windows(header: str) -> dict[str, tuple[int, int]]:
    return {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r'"(\w+)";r=(\d+);t=(\d+)', header)}


def test_rate_limit_headers_follow_the_configured_policy(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(rate_limit_policy='"minute";q=30;w=10')

    answers = [api.get(f"{fake.url}/v2/pods"), api.get(f"{fake.url}/v2/catalog/gpus"), api.get(f"{fake.url}/v2/x")]

    assert [r.headers["RateLimit-Policy"] for r in answers] == ['"minute";q=30;w=10'] * 3
    assert [_policy_windows(r.headers["RateLimit"])["minute"][0] for r in answers] == [29, 28, 27]
    assert all(1 <= _policy_windows(r.headers["RateLimit"])["minute"][1] <= 10 for r in answers)


def test_the_default_quota_is_advertised_but_not_enforced(fake: FakeRunPod, api: requests.Session) -> None:
    answers = [api.get(f"{fake.url}/v2/pods") for _ in range(65)]

    assert {r.status_code for r in answers} == {200}
    assert _policy_windows(answers[-1].headers["RateLimit"])["minute"][0] == 0
    assert _policy_windows(answers[-1].headers["RateLimit"])["hour"][0] == 3000 - 65
    assert fake.rate_limited == {"quota": 0, "forced": 0}


def test_an_enforced_quota_answers_429_with_retry_after(
    fake: FakeRunPod, api: requests.Session, spec: Spec | None
) -> None:
    fake.configure(enforce_quota=True, rate_limit_policy='"minute";q=30;w=10')

    answers = [api.get(f"{fake.url}/v2/pods") for _ in range(30)]
    refused = [api.post(f"{fake.url}/v2/pods", json=gpu_body()), api.get(f"{fake.url}/v2/pods")]

    assert {r.status_code for r in answers} == {200}
    for response in refused:
        problem = assert_problem(response, 429, spec)
        assert problem["detail"] == "rate limit exceeded for the minute window"
        assert 1 <= int(response.headers["Retry-After"]) <= 10
        assert _policy_windows(response.headers["RateLimit"])["minute"] == (0, int(response.headers["Retry-After"]))
        assert response.headers["RateLimit-Policy"] == '"minute";q=30;w=10'
    assert fake.pods == {}
    assert fake.rate_limited == {"quota": 2, "forced": 0}
    assert [r["status"] for r in fake.request_log].count(429) == 2
    state = requests.get(f"{fake.url}/_fake/state", timeout=5).json()
    assert state["rateLimited"] == {"quota": 2, "forced": 0}
    assert state["quota"]["windows"][0] | {"reset": 0} == {
        "name": "minute",
        "quota": 30,
        "seconds": 10,
        "used": 30,  # refused requests use no quota
        "remaining": 0,
        "reset": 0,
    }


def test_the_quota_counts_every_authenticated_request_and_nothing_else(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(enforce_quota=True, rate_limit_policy='"minute";q=4;w=60')
    pod = create(api, fake)
    fake.configure(fail_next_gets=1)
    requests.get(f"{fake.url}/v2/pods", headers={"User-Agent": "x"}, timeout=5)  # 401: no key, not counted
    requests.get(f"{fake.url}/_fake/state", timeout=5)  # control: not counted
    fake.append_pod_log(pod["id"], "x")

    statuses = [api.get(f"{fake.url}/v2/pods/{pod['id']}").status_code]  # a 503 counts too
    with api.get(f"{fake.url}/v2/pods/{pod['id']}/logs", params={"tail": 1}, stream=True) as logs:
        statuses.append(logs.status_code)
    statuses += [api.get(f"{fake.url}/v2/catalog/gpus").status_code]
    statuses += [api.get(f"{fake.url}/v2/catalog/datacenters").status_code]

    assert statuses == [503, 200, 200, 429]


def test_retry_after_is_the_longest_reset_of_the_windows_used_up(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(enforce_quota=True, rate_limit_policy='"minute";q=3;w=60, "hour";q=3;w=3600')
    for _ in range(3):
        api.get(f"{fake.url}/v2/pods")

    refused = api.get(f"{fake.url}/v2/pods")

    assert refused.status_code == 429 and refused.json()["detail"] == "rate limit exceeded for the hour window"
    assert 3590 <= int(refused.headers["Retry-After"]) <= 3600


def test_a_used_up_window_opens_again_after_retry_after(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(enforce_quota=True, rate_limit_policy='"second";q=2;w=1')
    assert [api.get(f"{fake.url}/v2/pods").status_code for _ in range(2)] == [200, 200]
    refused = api.get(f"{fake.url}/v2/pods")
    assert refused.status_code == 429

    time.sleep(int(refused.headers["Retry-After"]))  # whole seconds, rounded up: always long enough

    assert api.get(f"{fake.url}/v2/pods").status_code == 200


def test_forced_429s_name_the_policys_first_window_and_are_counted(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(rate_limit_policy='"burst";q=30;w=10', rate_limit_next=1, rate_limit_retry_after=4)
    response = api.get(f"{fake.url}/v2/pods")
    assert response.json()["detail"] == "rate limit exceeded for the burst window"
    assert response.headers["RateLimit"] == '"burst";r=0;t=4'
    assert fake.rate_limited == {"quota": 0, "forced": 1}


def test_a_reset_starts_the_quota_afresh(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(enforce_quota=True, rate_limit_policy='"minute";q=1;w=60')
    api.get(f"{fake.url}/v2/pods")
    assert api.get(f"{fake.url}/v2/pods").status_code == 429
    fake.reset()
    response = api.get(f"{fake.url}/v2/pods")
    assert response.status_code == 200 and response.headers["RateLimit-Policy"] == RATE_LIMIT_POLICY
    assert fake.rate_limited == {"quota": 0, "forced": 0}


# --- logs (operations) ----------------------------------------------------------------------------


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(id, data) of each event of a Server-Sent Events body."""
    events = []
    for block in text.split("\n\n"):
        if block.strip():
            lines = dict(line.split(": ", 1) for line in block.splitlines())
            events.append((lines["id"], json.loads(lines["data"])))
    return events


def logs_of(api: requests.Session, fake: FakeRunPod, pod_id: str, **params: Any) -> list[tuple[str, dict[str, Any]]]:
    headers = {"Last-Event-ID": params.pop("last_event_id")} if "last_event_id" in params else {}
    response = api.get(f"{fake.url}/v2/pods/{pod_id}/logs", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return sse_events(response.text)


def running_pod_with_output(api: requests.Session, fake: FakeRunPod, *lines: str) -> str:
    pod = create(api, fake)
    api.get(f"{fake.url}/v2/pods/{pod['id']}")
    fake.append_pod_log(pod["id"], *lines)
    return str(pod["id"])


def test_logs_are_server_sent_events_as_described(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    fake.configure(logs_stream_seconds=0)
    pod_id = running_pod_with_output(api, fake, "Model loaded.", "Serving on :8080")

    response = api.get(f"{fake.url}/v2/pods/{pod_id}/logs")

    assert response.status_code == 200 and response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    assert response.headers["Connection"] == "keep-alive" and RATE_LIMIT.fullmatch(response.headers["RateLimit"])
    events = sse_events(response.text)
    assert [(data["source"], data["line"]) for _id, data in events] == [
        ("system", f"Provisioning pod {pod_id} (1 x {RTX}) in US-KS-2"),
        ("system", "Pulling image runpod/pytorch:2.4"),
        ("system", "Starting container"),
        ("system", "Container started"),
        ("container", "Model loaded."),
        ("container", "Serving on :8080"),
    ]
    sequence = []
    for event_id, data in events:
        match = EVENT_ID.fullmatch(event_id)
        assert match is not None and match.group(1) == data["ts"] and set(data) == {"ts", "source", "line"}
        sequence.append(int(match.group(2)))
        if spec is not None:
            assert spec.errors("LogSource", data["source"]) == []
    assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence)


def test_logs_backfill_by_source_tail_since_and_last_event_id(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(logs_stream_seconds=0)
    pod_id = running_pod_with_output(api, fake, "one", "two", "three")
    everything = logs_of(api, fake, pod_id)

    container = logs_of(api, fake, pod_id, source="container")
    system = logs_of(api, fake, pod_id, source="system", tail=1)
    nothing = logs_of(api, fake, pod_id, tail=0)
    after_two = logs_of(api, fake, pod_id, last_event_id=everything[-2][0], since="2000-01-01T00:00:00Z", tail=0)
    since_created = logs_of(api, fake, pod_id, since=everything[0][1]["ts"], tail=1)

    assert [d["line"] for _i, d in container] == ["one", "two", "three"]
    assert [d["line"] for _i, d in system] == ["Container started"]
    assert nothing == []
    assert [d["line"] for _i, d in after_two] == ["three"]  # Last-Event-ID wins over since and tail
    assert since_created == everything  # since (inclusive) wins over tail


def test_tail_defaults_to_100_lines(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(logs_stream_seconds=0)
    pod_id = running_pod_with_output(api, fake, *(f"line {n}" for n in range(150)))
    events = logs_of(api, fake, pod_id)
    assert len(events) == 100 and events[-1][1]["line"] == "line 149"


def test_logs_parameters_are_checked(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod_id = running_pod_with_output(api, fake)
    url = f"{fake.url}/v2/pods/{pod_id}/logs"
    cases: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"source": "stdout"}, {}),
        ({"tail": 5001}, {}),
        ({"tail": -1}, {}),
        ({"tail": "all"}, {}),
        ({"since": "yesterday"}, {}),
        ({"since": "2026-01-01T00:00:00"}, {}),  # no offset
        ({}, {"Last-Event-ID": "banana"}),
    ]
    for params, headers in cases:
        problem = assert_problem(api.get(url, params=params, headers=headers), 422, spec)
        assert problem["detail"] == "Request validation failed." and len(problem["errors"]) == 1


def test_logs_of_an_unknown_or_deleted_pod_are_404(fake: FakeRunPod, api: requests.Session, spec: Spec | None) -> None:
    pod_id = running_pod_with_output(api, fake, "last words")
    fake.configure(delete_lag_reads=2)
    assert api.delete(f"{fake.url}/v2/pods/{pod_id}").status_code == 204

    gone = api.get(f"{fake.url}/v2/pods/{pod_id}/logs")

    assert assert_problem(gone, 404, spec)["detail"] == "pod not found"
    assert_problem(api.get(f"{fake.url}/v2/pods/nosuchpod0/logs"), 404, spec)
    assert fake.pod_logs(pod_id)[-1]["line"] == "last words"  # the fake still shows tests what it printed


def test_the_log_stream_stays_open_and_carries_new_lines(fake: FakeRunPod, api: requests.Session) -> None:
    pod_id = running_pod_with_output(api, fake, "booted")
    response = api.get(f"{fake.url}/v2/pods/{pod_id}/logs", params={"tail": 1}, stream=True, timeout=5)
    lines = response.iter_lines(decode_unicode=True)

    backfill = [next(lines) for _ in range(3)]
    threading.Timer(0.2, fake.append_pod_log, args=(pod_id, "later")).start()
    live = [next(lines) for _ in range(3)]
    delete = threading.Timer(
        0.2, requests.delete, args=(f"{fake.url}/v2/pods/{pod_id}",), kwargs={"headers": api.headers, "timeout": 5}
    )
    delete.start()
    rest = list(lines)  # the stream ends when the pod goes
    delete.join()

    assert response.headers["Transfer-Encoding"] == "chunked"
    assert json.loads(backfill[1].removeprefix("data: "))["line"] == "booted"
    assert json.loads(live[1].removeprefix("data: ")) | {"ts": ""} == {"ts": "", "source": "container", "line": "later"}
    assert rest == []


def test_logs_stream_seconds_ends_the_stream(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(logs_stream_seconds=0.3)
    pod_id = running_pod_with_output(api, fake, "only")
    started = time.monotonic()
    events = logs_of(api, fake, pod_id, source="container")
    assert [d["line"] for _i, d in events] == ["only"] and time.monotonic() - started >= 0.3


def test_a_timed_boot_writes_its_steps_to_the_log_when_they_happened(fake: FakeRunPod, api: requests.Session) -> None:
    fake.configure(provisioning_seconds=40, starting_seconds=20)
    pod = create(api, fake)

    fake.age_pods(100)

    events = fake.pod_logs(pod["id"])
    created = _when(fake.pods[pod["id"]]["createdAt"])
    assert [(_when(e["ts"]) - created, e["line"]) for e in events[1:]] == [
        (timedelta(seconds=40), "Pulling image runpod/pytorch:2.4"),
        (timedelta(seconds=40), "Starting container"),
        (timedelta(seconds=60), "Container started"),
    ]


def test_pod_logs_over_http(fake: FakeRunPod, api: requests.Session) -> None:
    pod = create(api, fake)
    control = requests.Session()
    url = f"{fake.url}/_fake/pods/{pod['id']}/logs"

    added = control.post(url, json={"lines": ["a", "b"], "source": "container"}, timeout=5)
    listed = control.get(url, timeout=5)

    assert added.status_code == 200 and [e["line"] for e in added.json()["events"]] == ["a", "b"]
    assert [e["line"] for e in listed.json()["events"]][-2:] == ["a", "b"]
    assert control.post(url, json={"lines": "a"}, timeout=5).status_code == 400
    assert control.post(url, json={"lines": ["a"], "source": "stderr"}, timeout=5).status_code == 400
    assert control.get(f"{fake.url}/_fake/pods/nope/logs", timeout=5).status_code == 404
    assert control.put(url, json={}, timeout=5).headers["Allow"] == "GET, POST"


# --- the new switches -----------------------------------------------------------------------------


def test_new_switches_default_to_todays_behaviour(fake: FakeRunPod) -> None:
    config = fake.config.to_json()
    assert config["provisioning_seconds"] == config["starting_seconds"] == 0
    assert config["fail_boot_next"] == config["stuck_starting_next"] == 0 and config["cost_markup"] == 1
    assert config["enforce_quota"] is False and config["rate_limit_policy"] == RATE_LIMIT_POLICY
    assert list(config["data_centers"]) == ["US-KS-2", "US-TX-3", "EU-RO-1", "EU-SE-1"]
    assert config["logs_stream_seconds"] is None and config["community_gpu_prices"] == {}


def test_configure_rejects_bad_new_switches(fake: FakeRunPod) -> None:
    bad: dict[str, Any] = {
        "provisioning_seconds": -1,
        "fail_boot_gpu_ids": RTX,
        "stuck_starting_template_ids": [1],
        "data_centers": {"US-KS-2": {RTX: "PLENTY"}},
        "rate_limit_policy": "60 per minute",
        "enforce_quota": "yes",
        "logs_stream_seconds": "forever",
        "community_gpu_prices": {RTX: -1},
    }
    with pytest.raises(FakeConfigError) as caught:
        fake.configure(**bad)
    assert len(caught.value.errors) == len(bad)
    for policy in ['"minute";q=1', '"minute";q=1;w=0', '"a";q=1;w=1, "a";q=2;w=2']:
        with pytest.raises(FakeConfigError):
            fake.configure(rate_limit_policy=policy)
    assert fake.config.rate_limit_policy == RATE_LIMIT_POLICY


def test_new_switches_over_http(fake: FakeRunPod) -> None:
    changes = {
        "data_centers": {"EU-RO-1": [RTX]},
        "rate_limit_policy": '"minute"; q=30; w=10',
        "fail_boot_template_ids": ["tpl-anim"],
        "logs_stream_seconds": 0,
    }
    configured = requests.post(f"{fake.url}/_fake/config", json=changes, timeout=5).json()["config"]
    assert configured["data_centers"] == {"EU-RO-1": {RTX: "HIGH"}}
    assert configured["rate_limit_policy"] == '"minute";q=30;w=10'  # as it is advertised
    assert configured["fail_boot_template_ids"] == ["tpl-anim"] and configured["logs_stream_seconds"] == 0


# --- serving -------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com"])  # noqa: S104 - refused
def test_only_loopback_binds(host: str) -> None:
    with pytest.raises(ValueError, match="refusing to bind"):
        FakeRunPod(host=host)


def test_context_manager_stops_serving() -> None:
    with start_fake_runpod("k") as fake:
        url = fake.url
        assert url.startswith("http://127.0.0.1:")
        assert requests.get(f"{url}/v2/pods", headers={"Authorization": "Bearer k"}, timeout=5).status_code == 200
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/v2/pods", timeout=2)


TEMPLATE_ARGS = ("--template", "tpl-renderer", "--template", "tpl-anim")


def test_the_cli_serves_until_sigterm() -> None:
    process = subprocess.Popen(
        [*(sys.executable, "-m", "tests.fakes.runpod", "--port", "0", "--api-key", "dev-key"), *TEMPLATE_ARGS],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": f"{REPO / 'layers' / 'scheduler'}:{REPO}"},
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        headers = {"Authorization": "Bearer dev-key"}
        body = {"name": "x", "templateId": "tpl-anim", "gpu": {"id": RTX}}
        assert requests.post(f"{url}/v2/pods", json=body, headers=headers, timeout=5).status_code == 201
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_shipped_code_never_imports_the_fake() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for top in ("layers", "functions")
        for path in (REPO / top).rglob("*.py")
        if re.search(r"^\s*(from|import)\s+tests\b", path.read_text(), re.MULTILINE)
    ]
    assert offenders == []
