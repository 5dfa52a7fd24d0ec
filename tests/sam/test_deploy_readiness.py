"""Deploy readiness: template.yaml as CloudFormation (AWS's SAM translator) and samconfig.toml.

`make test` runs `sam validate --lint` itself, in its `validate` step.

The translation runs in .venv-sam (the translator's pydantic pin cannot share the dev venv), through
tests/support/sam_transform.py; no AWS call is made.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import pytest

from scheduler.lifecycle import LIVE
from tests.sam.conftest import REPO, require_sam_cli
from tests.support.cfn_conditions import deployed
from tests.support.translated_template import translated_template

ROUTES = {
    ("GET", "/health"): "HealthFunction",
    ("GET", "/console"): "ConsoleFunction",
    ("GET", "/console/{asset}"): "ConsoleFunction",
    ("POST", "/v1/lease"): "AcquireLeaseFunction",
    ("GET", "/v1/leases"): "ListLeasesFunction",
    ("GET", "/v1/lease/{lease_id}"): "GetLeaseFunction",
    ("POST", "/v1/lease/{lease_id}/renew"): "RenewLeaseFunction",
    ("DELETE", "/v1/lease/{lease_id}"): "ReleaseLeaseFunction",
    ("GET", "/v1/lease/{lease_id}/logs"): "LeaseLogsFunction",
    ("DELETE", "/v1/leases"): "ReleaseOwnerLeasesFunction",
    ("GET", "/v1/usage"): "UsageFunction",
    ("POST", "/v1/callers"): "CreateCallerFunction",
    ("GET", "/v1/callers"): "ListCallersFunction",
    ("POST", "/v1/callers/{name}/rotate"): "RotateCallerTokenFunction",
    ("DELETE", "/v1/callers/{name}"): "DeleteCallerFunction",
    ("GET", "/v1/lease/{lease_id}/events"): "LeaseEventsFunction",
    ("POST", "/v1/webhooks"): "CreateWebhookFunction",
    ("GET", "/v1/webhooks"): "ListWebhooksFunction",
    ("DELETE", "/v1/webhooks/{webhook_id}"): "DeleteWebhookFunction",
    ("GET", "/v1/queue"): "QueueFunction",
}
# Each AuthMode's authorization of every route but the open ones (AWS_IAM: SigV4, verified by API Gateway).
MODE_SCHEMES = {"secret": "InternalSecretAuthorizer", "token": "CallerTokenAuthorizer", "iam": "AWS_IAM"}
# Open to anyone: liveness, and the console's page and files (no data: the page calls the API with a credential).
OPEN_PATHS = {"/health", "/console", "/console/{asset}"}
LIVE_STATUSES = {status.value for status in LIVE}
CLEANUP_FUNCTIONS = {"SweepExpiredFunction", "TtlStreamFunction", "ReconcileWorkersFunction"}
DYNAMODB_WRITES = re.compile(r"^dynamodb:(Put|Update|Delete|BatchWrite|TransactWrite|PartiQL(Insert|Update|Delete))")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    """template.yaml translated to the CloudFormation `sam deploy` submits."""
    require_sam_cli()
    return translated_template()


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return dict(template["Resources"])


def _of_type(resources: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource["Properties"] for name, resource in resources.items() if resource["Type"] == kind}


def _branches(value: Any) -> list[Any]:
    """Both outcomes of an Fn::If; AWS::NoValue is nothing."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        return _branches(value["Fn::If"][1]) + _branches(value["Fn::If"][2])
    if value == {"Ref": "AWS::NoValue"}:
        return []
    return [value]


def _role_statements(resources: dict[str, Any], function: str) -> list[dict[str, Any]]:
    role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = []
    for entry in resources[role]["Properties"].get("Policies", []):
        for policy in _branches(entry):
            for statement in policy["PolicyDocument"]["Statement"]:
                statements += _branches(statement)
    return statements


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        actions |= set(action if isinstance(action, list) else [action])
    return actions


def test_one_function_per_route(resources: dict[str, Any]) -> None:
    (api,) = _of_type(resources, "AWS::ApiGatewayV2::Api").values()
    routes = {}
    for path, methods in api["Body"]["paths"].items():
        for method, operation in methods.items():
            uri = operation["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
            routes[(method.upper(), path)] = re.search(r"\$\{(\w+)\.Arn\}", uri).group(1)  # type: ignore[union-attr]

    assert routes == ROUTES
    # One function per route, but the console's page and its files are one function (they are one thing).
    assert len(set(routes.values())) == len(routes) - 1
    for function in routes.values():
        assert resources[function]["Type"] == "AWS::Lambda::Function"


def test_both_lambda_authorizers_run_the_authorizer_function(resources: dict[str, Any]) -> None:
    (api,) = _of_type(resources, "AWS::ApiGatewayV2::Api").values()
    schemes = api["Body"]["components"]["securitySchemes"]
    secret = schemes["InternalSecretAuthorizer"]["x-amazon-apigateway-authorizer"]
    token = schemes["CallerTokenAuthorizer"]["x-amazon-apigateway-authorizer"]
    for scheme in (secret, token):
        assert scheme["type"] == "request"
        assert scheme["authorizerPayloadFormatVersion"] == "2.0"
        assert scheme["enableSimpleResponses"] is True
        assert scheme["authorizerUri"]["Fn::Sub"][1]["__FunctionArn__"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
    assert (secret["identitySource"], secret["authorizerResultTtlInSeconds"]) == (
        ["$request.header.X-Internal-Secret"],
        300,
    )
    assert token["identitySource"] == ["$request.header.Authorization"]
    assert token["authorizerResultTtlInSeconds"] == {"Ref": "AuthCacheSeconds"}
    assert schemes["AWS_IAM"]["x-amazon-apigateway-authtype"] == "awsSigv4"


@pytest.mark.parametrize("mode", sorted(MODE_SCHEMES))
def test_every_route_but_the_open_ones_is_authorized_as_the_auth_mode_says(template: dict[str, Any], mode: str) -> None:
    stack = deployed(template, {"AuthMode": mode})
    (api,) = _of_type(stack["Resources"], "AWS::ApiGatewayV2::Api").values()
    for path, methods in api["Body"]["paths"].items():
        for method, operation in methods.items():
            expected = [{"NONE": []}] if path in OPEN_PATHS else [{MODE_SCHEMES[mode]: []}]
            assert operation["security"] == expected, f"{method} {path}"


def test_the_bootstrap_token_exists_in_token_mode_only(template: dict[str, Any]) -> None:
    assert "BootstrapTokenSecret" in deployed(template, {"AuthMode": "token"})["Resources"]
    assert "BootstrapTokenSecret" not in deployed(template, {"AuthMode": "secret"})["Resources"]


def test_leases_table_has_ttl_stream_and_sparse_due_index(resources: dict[str, Any]) -> None:
    table = resources["LeasesTable"]["Properties"]

    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert table["KeySchema"] == [{"AttributeName": "lease_id", "KeyType": "HASH"}]
    due, starting, queued = table["GlobalSecondaryIndexes"]
    assert due["IndexName"] == "live-by-due"
    assert due["KeySchema"] == [
        {"AttributeName": "live_shard", "KeyType": "HASH"},
        {"AttributeName": "due_at", "KeyType": "RANGE"},
    ]
    assert starting["IndexName"] == "starting-by-created"
    assert starting["KeySchema"] == [
        {"AttributeName": "starting_shard", "KeyType": "HASH"},
        {"AttributeName": "created_epoch", "KeyType": "RANGE"},
    ]
    assert queued["IndexName"] == "queued-by-order"
    # Sparse: the index keys are not the table's key, so only items carrying them (live leases; leases
    # whose worker is starting; queued leases) appear.
    for index in (due, starting, queued):
        assert {key["AttributeName"] for key in index["KeySchema"]}.isdisjoint({"lease_id"})


def _mapping_of(resources: dict[str, Any], function: str) -> dict[str, Any]:
    (mapping,) = [
        mapping
        for mapping in _of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if mapping["FunctionName"] == {"Ref": function}
    ]
    return mapping


def test_the_leases_stream_has_two_readers_the_ttl_handler_and_the_lifecycle_events(resources: dict[str, Any]) -> None:
    readers = {
        mapping["FunctionName"]["Ref"]
        for mapping in _of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if mapping["EventSourceArn"] == {"Fn::GetAtt": ["LeasesTable", "StreamArn"]}
    }
    assert readers == {"TtlStreamFunction", "LifecycleEventsFunction"}  # DynamoDB allows two readers per shard


def test_the_lifecycle_events_read_every_change_in_order_and_keep_what_fails(resources: dict[str, Any]) -> None:
    mapping = _mapping_of(resources, "LifecycleEventsFunction")

    assert "FilterCriteria" not in mapping
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True and mapping["MaximumRetryAttempts"] > 0
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["StreamFailureQueue", "Arn"]}
    assert mapping.get("ParallelizationFactor", 1) == 1


def test_webhook_deliveries_come_from_their_queue_which_dead_letters_what_fails(resources: dict[str, Any]) -> None:
    mapping = _mapping_of(resources, "WebhookDeliveryFunction")
    queue = resources["WebhookDeliveryQueue"]["Properties"]
    timeout = resources["WebhookDeliveryFunction"]["Properties"]["Timeout"]

    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["WebhookDeliveryQueue", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and mapping["BatchSize"] <= 10
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    assert queue["VisibilityTimeout"] >= 6 * timeout  # Lambda's advice for an SQS event source
    assert resources["WebhookDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"] == 1_209_600


def test_the_events_go_to_the_stack_s_own_bus(resources: dict[str, Any]) -> None:
    (bus,) = _of_type(resources, "AWS::Events::EventBus")
    variables = resources["LifecycleEventsFunction"]["Properties"]["Environment"]["Variables"]

    assert variables["EVENT_BUS_NAME"] == {"Ref": bus}


def test_stream_mapping_filters_ttl_deletions_of_live_leases(resources: dict[str, Any]) -> None:
    mapping = _mapping_of(resources, "TtlStreamFunction")

    assert mapping["FunctionName"] == {"Ref": "TtlStreamFunction"}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["LeasesTable", "StreamArn"]}
    deletion, ended, enqueued = (json.loads(criterion["Pattern"]) for criterion in mapping["FilterCriteria"]["Filters"])
    assert deletion["eventName"] == ["REMOVE"]
    assert deletion["userIdentity"] == {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}
    assert set(deletion["dynamodb"]["OldImage"]["status"]["S"]) == LIVE_STATUSES
    # The queue is served when a lease holding capacity ends, and when a lease is queued.
    assert ended["eventName"] == ["MODIFY"] and set(ended["dynamodb"]["NewImage"]["status"]["S"]) >= {"released"}
    assert enqueued == {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"status": {"S": ["queued"]}}}}
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["StreamFailureQueue", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] > 0


def test_schedules_run_the_sweep_and_the_reconciler(resources: dict[str, Any]) -> None:
    rules = {
        rule["Targets"][0]["Arn"]["Fn::GetAtt"][0]: rule["ScheduleExpression"]
        for rule in _of_type(resources, "AWS::Events::Rule").values()
    }

    assert rules["SweepExpiredFunction"] == "rate(1 minute)"
    assert rules["ReconcileWorkersFunction"] == {"Ref": "ReconcileSchedule"}
    allowed = {
        permission["FunctionName"]["Ref"]
        for permission in _of_type(resources, "AWS::Lambda::Permission").values()
        if permission["Principal"] == "events.amazonaws.com"
    }
    assert allowed >= {"SweepExpiredFunction", "ReconcileWorkersFunction"}


def test_idempotency_table_expires_its_records(resources: dict[str, Any]) -> None:
    table = resources["IdempotencyTable"]["Properties"]

    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert resources["AcquireLeaseFunction"]["Properties"]["Environment"]["Variables"]["IDEMPOTENCY_TABLE"] == {
        "Ref": "IdempotencyTable"
    }


def test_dashboard_and_alarms(resources: dict[str, Any]) -> None:
    (dashboard,) = _of_type(resources, "AWS::CloudWatch::Dashboard").values()
    alarms = _of_type(resources, "AWS::CloudWatch::Alarm")

    assert "DashboardBody" in dashboard
    assert {
        "OrphansFoundAlarm",
        "GhostLeasesAlarm",
        "SweepLagAlarm",
        "StreamHandlerErrorsAlarm",
        "BootFailuresAlarm",
        "UnconfiguredHostReleaseAlarm",
        "WebhookDeadLetteredAlarm",
        "WebhookDeadLetterQueueDepthAlarm",
        "LifecycleEventsLagAlarm",
    } <= set(alarms)
    assert "WebhookDeliveryLatency" in str(dashboard["DashboardBody"])
    assert "BootFailure" in str(dashboard["DashboardBody"]) and "TimeToReady" in str(dashboard["DashboardBody"])
    for name, alarm in alarms.items():
        assert alarm["TreatMissingData"] == "notBreaching", name
        assert _branches(alarm["AlarmActions"]) == [[{"Ref": "AlarmTopicArn"}]], name


def test_policies_are_least_privilege(resources: dict[str, Any]) -> None:
    tables = {name for name, resource in resources.items() if resource["Type"] == "AWS::DynamoDB::Table"}
    for function in _of_type(resources, "AWS::Lambda::Function"):
        statements = _role_statements(resources, function)
        actions = _actions(statements)
        assert not [action for action in actions if action == "*" or action.endswith(":*")], function
        for statement in statements:
            if any(action.startswith("dynamodb:") for action in _actions([statement])):
                text = json.dumps(statement["Resource"])
                assert set(re.findall(r'"(\w+Table)"', text)) <= tables, (function, text)
        if function in {"HealthFunction", "ConsoleFunction"}:
            assert not actions, f"{function} needs no AWS permission: {actions}"
        if function in {"ListLeasesFunction", "AuthorizerFunction", "UsageFunction"}:
            assert not [action for action in actions if DYNAMODB_WRITES.match(action)], function
        if function == "LeaseLogsFunction":  # a RunPod log stream spends the account's request budget (PutItem)
            assert {action for action in actions if DYNAMODB_WRITES.match(action)} == {"dynamodb:PutItem"}
        if function == "GetLeaseFunction":  # ends a lease whose worker stopped (updates); RunPod's budget (PutItem)
            written = {action for action in actions if DYNAMODB_WRITES.match(action)}
            assert written == {"dynamodb:UpdateItem", "dynamodb:PutItem"}
        reads_secrets = any(action.startswith("secretsmanager:") for action in actions)
        assert reads_secrets == (
            function
            in {
                "AuthorizerFunction",
                "AcquireLeaseFunction",
                "ReleaseLeaseFunction",
                "SweepExpiredFunction",
                "TtlStreamFunction",
                "ReconcileWorkersFunction",
                "GetLeaseFunction",
                "LeaseLogsFunction",
                "ReleaseOwnerLeasesFunction",
            }
        ), function


def _reserved_concurrency(template: dict[str, Any], **parameters: str) -> dict[str, Any]:
    """ReservedConcurrentExecutions of each function in a stack deployed with these parameters."""
    resources = deployed(template, parameters)["Resources"]
    return {
        name: properties["ReservedConcurrentExecutions"]
        for name, properties in _of_type(resources, "AWS::Lambda::Function").items()
        if "ReservedConcurrentExecutions" in properties
    }


def test_the_default_stack_reserves_no_concurrency(template: dict[str, Any]) -> None:
    """New accounts have a concurrency quota of 10 and Lambda keeps 10 unreserved: any reservation fails."""
    assert _reserved_concurrency(template) == {}


def test_cleanup_concurrency_is_reserved_when_asked_for(template: dict[str, Any]) -> None:
    reserved = _reserved_concurrency(template, CleanupReservedConcurrency="2")

    assert reserved == dict.fromkeys(CLEANUP_FUNCTIONS, "2")


def test_the_reservation_parameter_says_when_to_set_it_and_what_the_account_needs(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["CleanupReservedConcurrency"]

    assert parameter["Default"] == 0
    assert parameter["MinValue"] == 0
    description = " ".join(parameter["Description"].split())
    assert "0 (the default) reserves none" in description
    assert "at least 10 + 3 x this value" in description


def test_the_dev_stack_deploys_into_a_new_account() -> None:
    """`sam deploy` ([default]) and `--config-env dev` leave the reservation at the template's default: none."""
    config = tomllib.loads((REPO / "samconfig.toml").read_text())
    for environment in ("default", "dev"):
        overrides = dict(
            item.split("=", 1) for item in config[environment]["deploy"]["parameters"]["parameter_overrides"].split()
        )
        assert overrides.get("CleanupReservedConcurrency", "0") == "0", environment


def test_every_function_runs_on_the_architecture_parameter(template: dict[str, Any]) -> None:
    assert template["Parameters"]["Architecture"]["AllowedValues"] == ["x86_64", "arm64"]
    for architecture in ("x86_64", "arm64"):
        resources = deployed(template, {"Architecture": architecture})["Resources"]
        functions = _of_type(resources, "AWS::Lambda::Function")
        architectures = {name: properties["Architectures"] for name, properties in functions.items()}
        assert architectures == {name: [architecture] for name in functions}
        (layer,) = _of_type(resources, "AWS::Lambda::LayerVersion").values()
        assert architecture in layer["CompatibleArchitectures"]


def test_parameters_for_secrets_docker_host_images_providers_and_limits(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    for name in (
        "InternalSecretArn",
        "DockerTlsSecretArn",
        "RunpodApiKeySecretArn",
        "DockerHost",
        "DockerApiVersion",
        "RendererImage",
        "AnimImage",
        "Providers",
        "LocalDockerMaxLeases",
        "RunpodMaxLeases",
        "MaxLeasesPerOwner",
    ):
        assert name in parameters, name


def test_outputs_name_the_api_url_and_the_table(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]

    assert "execute-api" in outputs["ApiUrl"]["Value"]["Fn::Sub"]
    assert outputs["LeasesTableName"]["Value"] == {"Ref": "LeasesTable"}


def test_sam_local_endpoint_is_declared_but_never_deployed(resources: dict[str, Any]) -> None:
    """`sam local --env-vars` can only set declared variables; in AWS the variable must not exist."""
    for function in _of_type(resources, "AWS::Lambda::Function").values():
        variables = function.get("Environment", {}).get("Variables", {})
        assert variables.get("AWS_ENDPOINT_URL") == {"Ref": "AWS::NoValue"}


def test_samconfig_has_dev_and_prod_and_local_settings() -> None:
    config = tomllib.loads((REPO / "samconfig.toml").read_text())

    stacks = {env: config[env]["global"]["parameters"]["stack_name"] for env in ("default", "dev", "prod")}
    # A plain `sam deploy` ([default]) deploys the dev stack, never production.
    assert stacks["default"] == stacks["dev"] != stacks["prod"]
    for environment in ("default", "dev", "prod"):
        deploy = config[environment]["deploy"]["parameters"]
        assert deploy["capabilities"] == "CAPABILITY_IAM"
        assert deploy["confirm_changeset"] is True
        assert deploy["resolve_s3"] is True
        assert deploy["s3_prefix"] == config[environment]["global"]["parameters"]["stack_name"], environment
    for command in ("local_invoke", "local_start_api"):
        local = config["default"][command]["parameters"]
        assert local["docker_network"] == "host"
        assert local["skip_pull_image"] is True
