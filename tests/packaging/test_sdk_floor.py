"""The oldest boto3/botocore the functions support (they run on the Lambda runtime's) is stated once, in
requirements-botocore-floor.txt, and `make unit-botocore-floor` runs the unit suite on exactly it."""

from __future__ import annotations

import importlib.metadata
import re

from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.locks import REPO, read_lock, top_level_pins

FLOOR = top_level_pins("requirements-botocore-floor.txt")
# What the code itself needs, found by running the unit suite on older releases: DynamoDB's
# ReturnValuesOnConditionCheckFailure on single-item writes (botocore 1.29.164; 1.29.163 refuses the
# parameter), next to the layer's urllib3 2 (1.29.120 and older fail at import).
CODE_NEEDS_BOTOCORE = Version("1.29.164")


def test_boto3_and_botocore_floors_are_one_release() -> None:
    assert FLOOR["boto3"] == FLOOR["botocore"]  # boto3 1.34.x requires botocore 1.34.x, released together


def test_the_floor_is_no_older_than_the_layers_libraries_declare() -> None:
    """aws-lambda-powertools states the boto3 it supports (extra aws-sdk); the layer ships it."""
    declared = [
        Requirement(requirement)
        for requirement in importlib.metadata.requires("aws-lambda-powertools") or []
        if Requirement(requirement).name == "boto3"
    ]
    assert declared
    floors = [
        Version(spec.version) for requirement in declared for spec in requirement.specifier if spec.operator == ">="
    ]
    assert floors and max(floors) <= Version(FLOOR["boto3"])


def test_the_floor_is_no_older_than_the_code_needs() -> None:
    assert Version(FLOOR["botocore"]) >= CODE_NEEDS_BOTOCORE


def test_sam_local_runs_the_functions_on_the_floor_sdk() -> None:
    """The Lambda base image stand-in carries the runtime's boto3: the floor."""
    stand_in = read_lock("scripts/lambda-base-image.requirements.lock")
    assert stand_in["boto3"].version == FLOOR["boto3"]
    assert stand_in["botocore"].version == FLOOR["botocore"]


def test_the_readme_states_the_floor() -> None:
    readme = " ".join((REPO / "README.md").read_text().split())
    assert re.search(rf"boto3/botocore {re.escape(FLOOR['botocore'])}\b", readme)
