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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    assert_problem(api.get(f"{fake.url}/v2/catalog/gpus"), 501, spec)


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
