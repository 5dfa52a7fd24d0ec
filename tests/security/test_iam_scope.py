"""Least privilege, read off the CloudFormation that SAM actually deploys (template.yaml translated).

The SAM translator lives in .venv-sam (its pydantic pin, ~=2.13, cannot share the
dev venv's pydantic 2.14), so the translation runs there as a subprocess: see tests/support/sam_transform.py.

What is asserted:
- every role is assumed by Lambda alone, and carries only the AWS managed policies allow-listed below;
- no statement grants an action with a wildcard (`*`, `dynamodb:*`, `dynamodb:Get*`) or uses
  NotAction / NotResource;
- no statement has `Resource: "*"` unless every action in it is one AWS grants on `*` only;
- every other resource is the project's own: a table, queue or secret defined in the template, or a
  secret whose ARN the deployer passes as a `...SecretArn` parameter;
- the secrets reach only the functions that need them, and the read-only routes cannot write;
- every Lambda permission names its source.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.translated_template import SAM_PYTHON, translated_template

REPO = Path(__file__).resolve().parents[2]

# AWS managed policies SAM attaches by itself. Their statements are AWS's, on `Resource: "*"`:
ALLOWED_MANAGED_POLICIES = {
    # Every function: logs:CreateLogGroup/CreateLogStream/PutLogEvents. SAM's default role.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    # `Tracing: Active`: xray:PutTraceSegments, PutTelemetryRecords, GetSampling*. X-Ray has no
    # resource-level permissions, so `*` is what AWS requires.
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    # A function with a DynamoDB stream event: dynamodb:DescribeStream/GetRecords/GetShardIterator/
    # ListStreams on `*`. SAM adds it for the event source mapping and has no switch to scope it;
    # only a hand-written Role would. Read-only on stream records; accepted, see docs/security.md.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole",
    # A function with an SQS event (the webhook deliveries): sqs:ReceiveMessage/DeleteMessage/GetQueueAttributes/
    # ChangeMessageVisibility on `*`, for the event source mapping, as above; accepted, see docs/security.md.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
}
STREAM_POLICY = "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole"
QUEUE_POLICY = "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole"

# Actions AWS authorizes on `Resource: "*"` only (no resource-level permissions). An inline
# statement may use `*` only when every one of its actions is here.
ACTIONS_REQUIRING_STAR = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:GetSamplingStatisticSummaries",
    "dynamodb:ListStreams",
    "cloudwatch:PutMetricData",  # EMF needs none (metrics go through logs), listed for completeness
}

# Per service: the resource types a statement may point at. A service not named here fails the test
# until someone decides how it is scoped and adds it.
PROJECT_RESOURCE_TYPES = {
    "dynamodb": {"AWS::DynamoDB::Table"},
    "sqs": {"AWS::SQS::Queue"},
    "secretsmanager": {"AWS::SecretsManager::Secret"},
    "kms": {"AWS::KMS::Key"},
    "lambda": {"AWS::Lambda::Function"},  # the sweep's hand-off to itself, nothing else (see below)
    "events": {"AWS::Events::EventBus"},  # the lifecycle events, on the stack's own bus
}
# Parameters through which the deployer passes the ARN of a secret the project owns.
SECRET_ARN_PARAMETER = re.compile(r"^[A-Za-z0-9]+SecretArn$")
# Within a project resource's ARN, `*` may only stand for the table's indexes or stream labels.
ALLOWED_ARN_WILDCARDS = re.compile(r"/(index|stream)/\*$")
PSEUDO_PARAMETER = re.compile(r"^AWS::")

# Which function may read which secret (by the logical id or parameter the ARN comes from).
INTERNAL_SECRET = {"InternalSecret", "InternalSecretArn"}
BOOTSTRAP_TOKEN = {"BootstrapTokenSecret"}  # the bootstrap operator's token (AuthMode token)
AUTHORIZER_SECRETS = INTERNAL_SECRET | BOOTSTRAP_TOKEN
PROVIDER_SECRETS = {"DockerTlsSecretArn", "RunpodApiKeySecretArn", "ModalTokenSecretArn"}
PROVIDER_FUNCTIONS = {
    "AcquireLeaseFunction",
    "ReleaseLeaseFunction",
    "SweepExpiredFunction",
    "TtlStreamFunction",
    "ReconcileWorkersFunction",
    "GetLeaseFunction",  # ends a lease whose local-docker worker it finds stopped; asks a starting worker's readiness
    "ReleaseOwnerLeasesFunction",
    "LeaseLogsFunction",  # reads the worker's output from its provider
}
READ_ONLY_FUNCTIONS = {
    "ListLeasesFunction",
    "HealthFunction",
    "UsageFunction",
    "ListCallersFunction",
    "ListWebhooksFunction",
    "LeaseEventsFunction",
    "ConsoleFunction",
}
# The callers registry: read by the authorizer (a token) and, in iam mode, by every route (a principal); changed
# only by the routes that manage it.
CALLERS_WRITERS = {"CreateCallerFunction", "RotateCallerTokenFunction", "DeleteCallerFunction"}
# Functions that call a provider only for what a read needs: GET asks the Docker host about an active lease's
# worker, and any provider about a starting one (RunPod's quota: at most every 2 s per starting lease).
READ_PATH_FUNCTIONS = {"GetLeaseFunction"}
WRITE_ACTIONS = re.compile(r"^dynamodb:(Put|Update|Delete|BatchWrite|TransactWrite|PartiQL(Insert|Update|Delete))")


@dataclass(frozen=True)
class Grant:
    """One statement of one inline policy of one role (both branches of an Fn::If are kept)."""

    role: str
    policy: str
    statement: dict[str, Any]

    @property
    def actions(self) -> list[str]:
        return _as_list(self.statement.get("Action"))

    @property
    def resources(self) -> list[Any]:
        return [branch for resource in _as_list(self.statement.get("Resource")) for branch in _branches(resource)]

    def __str__(self) -> str:
        return f"{self.role}/{self.policy}: {json.dumps(self.statement, sort_keys=True)}"


def _require_sam_venv() -> None:
    if SAM_PYTHON.exists():
        return
    message = f"{SAM_PYTHON} is missing: run `make validate` to install the SAM CLI and its translator"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    """template.yaml as the CloudFormation SAM deploys."""
    _require_sam_venv()
    return translated_template()


@pytest.fixture(scope="module")
def resources(transformed: dict[str, Any]) -> dict[str, Any]:
    return dict(transformed["Resources"])


@pytest.fixture(scope="module")
def grants(resources: dict[str, Any]) -> list[Grant]:
    found = list(_grants(resources))
    assert found, "no inline IAM statement found: the translation changed shape"
    return found


# --- reading policies -----------------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _branches(value: Any) -> Iterator[Any]:
    """Both outcomes of an Fn::If (recursively); AWS::NoValue is nothing."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        _, when_true, when_false = value["Fn::If"]
        yield from _branches(when_true)
        yield from _branches(when_false)
    elif value == {"Ref": "AWS::NoValue"}:
        return
    else:
        yield value


def _documents(resources: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(role or policy resource, policy name, policy document) for every inline/standalone policy."""
    for logical_id, resource in resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            for entry in _as_list(properties.get("Policies")):
                for policy in _branches(entry):
                    yield logical_id, policy["PolicyName"], policy["PolicyDocument"]
        elif resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
            yield logical_id, logical_id, properties["PolicyDocument"]


def _grants(resources: dict[str, Any]) -> Iterator[Grant]:
    for owner, name, document in _documents(resources):
        for entry in _as_list(document.get("Statement")):
            for statement in _branches(entry):
                yield Grant(owner, name, statement)


def _references(value: Any) -> tuple[set[str], list[str]]:
    """(logical ids and parameters a value refers to, the literal ARN templates it is built from)."""
    names: set[str] = set()
    literals: list[str] = []
    if isinstance(value, str):
        literals.append(value)
    elif isinstance(value, list):
        for item in value:
            more, text = _references(item)
            names |= more
            literals += text
    elif isinstance(value, dict):
        if "Ref" in value:
            names.add(value["Ref"])
        elif "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            names.add(target[0] if isinstance(target, list) else target.split(".", 1)[0])
        elif "Fn::Sub" in value:
            body = value["Fn::Sub"]
            text, variables = (body[0], body[1]) if isinstance(body, list) else (body, {})
            literals.append(text)
            for placeholder in re.findall(r"\$\{([^}!]+)\}", text):
                if placeholder in variables:
                    more, _ = _references(variables[placeholder])
                    names |= more
                else:
                    names.add(placeholder.split(".", 1)[0])
        elif "Fn::If" in value:
            for branch in _branches(value):
                more, text = _references(branch)
                names |= more
                literals += text
        else:
            for item in value.values():
                more, text = _references(item)
                names |= more
                literals += text
    return {name for name in names if not PSEUDO_PARAMETER.match(name)}, literals


def _role_of(function: dict[str, Any]) -> str:
    role = function["Properties"]["Role"]
    assert isinstance(role, dict) and "Fn::GetAtt" in role, f"unexpected role reference {role}"
    return str(role["Fn::GetAtt"][0])


def _functions(resources: dict[str, Any]) -> dict[str, str]:
    """Function logical id → its role's logical id."""
    return {
        logical_id: _role_of(resource)
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
    }


# --- the roles themselves ------------------------------------------------------------------------


def test_every_role_is_assumed_by_lambda_only(resources: dict[str, Any]) -> None:
    roles = {key: value for key, value in resources.items() if value["Type"] == "AWS::IAM::Role"}
    assert roles
    for logical_id, role in roles.items():
        for statement in _as_list(role["Properties"]["AssumeRolePolicyDocument"]["Statement"]):
            assert statement["Effect"] == "Allow", logical_id
            assert _as_list(statement["Action"]) == ["sts:AssumeRole"], logical_id
            assert statement["Principal"] == {"Service": ["lambda.amazonaws.com"]}, logical_id


def test_managed_policies_are_only_the_allow_listed_aws_ones(resources: dict[str, Any]) -> None:
    stream_consumers = {
        _role_of(resources[mapping["Properties"]["FunctionName"]["Ref"]])
        for mapping in resources.values()
        if mapping["Type"] == "AWS::Lambda::EventSourceMapping"
    }
    for logical_id, role in resources.items():
        if role["Type"] != "AWS::IAM::Role":
            continue
        arns = {
            arn["Fn::Sub"].replace("${AWS::Partition}", "aws") if isinstance(arn, dict) else arn
            for entry in _as_list(role["Properties"].get("ManagedPolicyArns"))
            for arn in _branches(entry)
        }
        assert arns <= ALLOWED_MANAGED_POLICIES, f"{logical_id} has managed policies {arns - ALLOWED_MANAGED_POLICIES}"
        if STREAM_POLICY in arns or QUEUE_POLICY in arns:
            assert logical_id in stream_consumers, f"{logical_id} can read a stream or queue without consuming one"


# --- the statements ------------------------------------------------------------------------------


def test_no_action_has_a_wildcard(grants: list[Grant]) -> None:
    for grant in grants:
        assert "NotAction" not in grant.statement, str(grant)
        assert grant.actions, str(grant)
        for action in grant.actions:
            assert isinstance(action, str) and "*" not in action, f"wildcard action {action!r} in {grant}"


def test_no_resource_is_star_unless_aws_requires_it(grants: list[Grant]) -> None:
    for grant in grants:
        assert "NotResource" not in grant.statement, str(grant)
        assert grant.resources, str(grant)
        if "*" in grant.resources:
            unscoped = set(grant.actions) - ACTIONS_REQUIRING_STAR
            assert not unscoped, f"Resource '*' for {sorted(unscoped)} in {grant}"


def test_every_resource_is_the_projects_own(grants: list[Grant], transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    parameters = transformed.get("Parameters", {})
    for grant in grants:
        if grant.resources == ["*"]:
            continue  # only actions AWS authorizes on `*` alone (see the test above)
        services = {action.split(":", 1)[0] for action in grant.actions}
        assert len(services) == 1, f"one service per statement keeps the scoping reviewable: {grant}"
        (service,) = services
        assert service in PROJECT_RESOURCE_TYPES, (
            f"no scoping rule for {service}: add it to PROJECT_RESOURCE_TYPES after review ({grant})"
        )
        allowed_types = PROJECT_RESOURCE_TYPES[service]
        for resource in grant.resources:
            names, literals = _references(resource)
            assert names, f"{resource!r} names no resource of this stack: {grant}"
            for name in names:
                if name in resources:
                    kind = resources[name]["Type"]
                    assert kind in allowed_types, f"{service} on {name} ({kind}): {grant}"
                else:
                    assert name in parameters, f"{resource!r} refers to unknown {name}: {grant}"
                    assert service == "secretsmanager" and SECRET_ARN_PARAMETER.match(name), (
                        f"{service} on an ARN passed as parameter {name}: {grant}"
                    )
            for literal in literals:
                assert "*" not in ALLOWED_ARN_WILDCARDS.sub("", literal), f"wildcard in {literal!r}: {grant}"


# --- who may do what -----------------------------------------------------------------------------


def _secrets_by_function(resources: dict[str, Any], grants: list[Grant]) -> dict[str, set[str]]:
    by_role: dict[str, set[str]] = {}
    for grant in grants:
        if any(action.startswith("secretsmanager:") for action in grant.actions):
            for resource in grant.resources:
                by_role.setdefault(grant.role, set()).update(_references(resource)[0])
    return {function: by_role.get(role, set()) for function, role in _functions(resources).items()}


def test_only_the_authorizer_reads_the_internal_secret(resources: dict[str, Any], grants: list[Grant]) -> None:
    secrets = _secrets_by_function(resources, grants)
    readers = {function for function, names in secrets.items() if names & INTERNAL_SECRET}
    assert readers == {"AuthorizerFunction"}
    assert secrets["AuthorizerFunction"] <= AUTHORIZER_SECRETS


def test_only_the_authorizer_reads_the_bootstrap_token(resources: dict[str, Any], grants: list[Grant]) -> None:
    secrets = _secrets_by_function(resources, grants)
    assert {function for function, names in secrets.items() if names & BOOTSTRAP_TOKEN} == {"AuthorizerFunction"}


def test_only_the_callers_routes_change_the_registry(resources: dict[str, Any], grants: list[Grant]) -> None:
    roles = _functions(resources)
    writers = {
        function
        for function, role in roles.items()
        for grant in grants
        if grant.role == role
        and "CallersTable" in json.dumps(grant.statement.get("Resource"))
        and any(WRITE_ACTIONS.match(action) for action in grant.actions)
    }
    assert writers == CALLERS_WRITERS


def test_the_callers_registry_is_read_item_by_item_except_its_listing(
    resources: dict[str, Any], grants: list[Grant]
) -> None:
    readers = {role: function for function, role in _functions(resources).items()}
    for grant in grants:
        if "CallersTable" in json.dumps(grant.statement.get("Resource")):
            bulk = {"dynamodb:Scan", "dynamodb:Query", "dynamodb:BatchGetItem"} & set(grant.actions)
            assert not bulk or readers[grant.role] == "ListCallersFunction", str(grant)


def test_only_functions_that_call_a_provider_read_provider_credentials(
    resources: dict[str, Any], grants: list[Grant]
) -> None:
    secrets = _secrets_by_function(resources, grants)
    for function, names in secrets.items():
        if function in PROVIDER_FUNCTIONS:
            assert names <= PROVIDER_SECRETS, f"{function} reads {names - PROVIDER_SECRETS}"
        elif function != "AuthorizerFunction":
            assert not names, f"{function} does not call a provider but reads {names}"


def test_get_lease_reads_the_provider_secrets_and_no_other(resources: dict[str, Any], grants: list[Grant]) -> None:
    secrets = _secrets_by_function(resources, grants)
    for function in READ_PATH_FUNCTIONS:
        assert secrets[function] == PROVIDER_SECRETS


def test_get_lease_writes_leases_only_by_conditional_update(resources: dict[str, Any], grants: list[Grant]) -> None:
    role = _functions(resources)["GetLeaseFunction"]
    written = {
        action
        for grant in grants
        if grant.role == role and "LeasesTable" in json.dumps(grant.statement.get("Resource"))
        for action in grant.actions
        if WRITE_ACTIONS.match(action)
    }
    assert written == {"dynamodb:UpdateItem"}


def test_get_lease_puts_only_on_the_counters_table(resources: dict[str, Any], grants: list[Grant]) -> None:
    # RunPod's shared request budget (a readiness check on read spends one) is a PutItem on the counters table.
    role = _functions(resources)["GetLeaseFunction"]
    tables = {
        table
        for grant in grants
        if grant.role == role and "dynamodb:PutItem" in grant.actions
        for table in re.findall(r'"(\w+Table)"', json.dumps(grant.statement.get("Resource")))
    }
    assert tables == {"LeaseCountersTable"}


def _writers(resources: dict[str, Any], grants: list[Grant], table: str) -> set[str]:
    roles = _functions(resources)
    return {
        function
        for function, role in roles.items()
        for grant in grants
        if grant.role == role
        and table in _references(grant.statement.get("Resource"))[0]
        and any(WRITE_ACTIONS.match(action) for action in grant.actions)
    }


def test_only_the_events_function_writes_the_history(resources: dict[str, Any], grants: list[Grant]) -> None:
    assert _writers(resources, grants, "LeaseEventsTable") == {"LifecycleEventsFunction"}


def test_only_the_webhooks_routes_change_the_webhooks(resources: dict[str, Any], grants: list[Grant]) -> None:
    assert _writers(resources, grants, "WebhooksTable") == {"CreateWebhookFunction", "DeleteWebhookFunction"}


def test_only_the_delivery_function_can_read_a_webhook_s_secret(resources: dict[str, Any], grants: list[Grant]) -> None:
    readers = {role: function for function, role in _functions(resources).items()}
    reads = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Scan", "dynamodb:Query"}
    for grant in grants:
        on_table = [r for r in grant.resources if r == {"Fn::GetAtt": ["WebhooksTable", "Arn"]}]
        if not on_table or not reads & set(grant.actions):
            continue  # the index (which projects no secret), or no read
        condition = grant.statement.get("Condition", {})
        attributes = condition.get("ForAllValues:StringEquals", {}).get("dynamodb:Attributes")
        if readers[grant.role] == "WebhookDeliveryFunction":
            assert set(grant.actions) == {"dynamodb:GetItem"}, str(grant)
        else:
            assert attributes and "secret" not in attributes, f"{readers[grant.role]} may read secrets: {grant}"


def test_the_events_function_publishes_to_the_stack_s_bus_and_queue_only(
    resources: dict[str, Any], grants: list[Grant]
) -> None:
    role = _functions(resources)["LifecycleEventsFunction"]
    granted = {
        (action, name)
        for grant in grants
        if grant.role == role and not any(action.startswith("dynamodb:") for action in grant.actions)
        for action in grant.actions
        for resource in grant.resources
        for name in _references(resource)[0]
    }
    assert granted == {
        ("events:PutEvents", "LifecycleEventBus"),
        ("sqs:SendMessage", "WebhookDeliveryQueue"),
        ("sqs:SendMessage", "StreamFailureQueue"),  # SAM's, for the mapping's on-failure destination
    }


def test_read_only_functions_cannot_write(resources: dict[str, Any], grants: list[Grant]) -> None:
    roles = {role for function, role in _functions(resources).items() if function in READ_ONLY_FUNCTIONS}
    assert len(roles) == len(READ_ONLY_FUNCTIONS)
    for grant in grants:
        if grant.role in roles:
            written = [action for action in grant.actions if WRITE_ACTIONS.match(action)]
            assert not written, f"{grant.role} may {written}"


def test_every_lambda_permission_names_its_source(resources: dict[str, Any]) -> None:
    permissions = {key: value for key, value in resources.items() if value["Type"] == "AWS::Lambda::Permission"}
    assert permissions
    for logical_id, permission in permissions.items():
        properties = permission["Properties"]
        assert properties["Action"] == "lambda:InvokeFunction", logical_id
        assert properties["Principal"] in ("apigateway.amazonaws.com", "events.amazonaws.com"), logical_id
        names, _ = _references(properties.get("SourceArn"))
        assert names & set(resources), f"{logical_id} is not limited to a source of this stack"


def test_api_gateway_may_invoke_the_authorizer(resources: dict[str, Any]) -> None:
    authorizer_functions: set[str] = set()
    credentialed: set[str] = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::ApiGatewayV2::Api":
            continue
        schemes = resource["Properties"].get("Body", {}).get("components", {}).get("securitySchemes", {})
        for scheme in schemes.values():
            authorizer = scheme.get("x-amazon-apigateway-authorizer")
            if authorizer and authorizer.get("type") == "request":
                names, _ = _references(authorizer["authorizerUri"])
                authorizer_functions |= names
                if authorizer.get("authorizerCredentialsArn"):
                    credentialed |= names
    assert authorizer_functions, "no Lambda authorizer found"
    invocable = {
        name
        for permission in resources.values()
        if permission["Type"] == "AWS::Lambda::Permission"
        and permission["Properties"]["Principal"] == "apigateway.amazonaws.com"
        for name in _references(permission["Properties"]["FunctionName"])[0]
    }
    missing = authorizer_functions - invocable - credentialed
    assert not missing, f"API Gateway has no permission to invoke {sorted(missing)}"


def test_lease_rows_can_only_be_written_conditionally(grants: list[Grant]) -> None:
    for grant in grants:
        touches_leases = any("LeasesTable" in _references(resource)[0] for resource in grant.resources)
        if touches_leases:
            risky = {"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:PartiQLDelete"} & set(grant.actions)
            assert not risky, f"{grant.role} may {sorted(risky)} on the leases table"


def test_only_the_sweep_may_invoke_a_function_and_only_itself(resources: dict[str, Any], grants: list[Grant]) -> None:
    invoking = [grant for grant in grants if any(action.startswith("lambda:") for action in grant.actions)]
    assert invoking, "the sweep's hand-off grant is missing"
    for grant in invoking:
        assert grant.actions == ["lambda:InvokeFunction"], str(grant)
        assert {name for resource in grant.resources for name in _references(resource)[0]} == {
            "SweepExpiredFunction"
        }, str(grant)
        roles = {role["Ref"] for role in resources[grant.role]["Properties"]["Roles"]}
        assert roles == {_functions(resources)["SweepExpiredFunction"]}, str(grant)
