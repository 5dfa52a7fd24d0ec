"""Translate template.yaml to plain CloudFormation with AWS's SAM translator; print it as JSON.

Run with the SAM CLI's interpreter, where aws-sam-translator lives (its pydantic pin, ~=2.13, cannot
share the dev venv and its pydantic 2.14):

    .venv-sam/bin/python tests/support/sam_transform.py template.yaml > /tmp/transformed.json

With --deployed, the stack's view instead: conditions decided with the parameters' defaults and any
Name=Value overrides, AWS::NoValue removed (tests/support/cfn_conditions.py):

    .venv-sam/bin/python tests/support/sam_transform.py template.yaml --deployed
    .venv-sam/bin/python tests/support/sam_transform.py template.yaml --deployed CleanupReservedConcurrency=2

No AWS call is made: the managed-policy loader is a stub (the template names no managed policy by
its short name), and the region comes from AWS_DEFAULT_REGION (us-east-1 when unset).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


class _NoManagedPolicies:
    """Stands in for samtranslator's ManagedPolicyLoader, which would call IAM ListPolicies."""

    def load(self) -> dict[str, str]:
        return {}


def transform_template(path: Path) -> dict[str, Any]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    template = yaml_parse(path.read_text())
    # As `sam validate` does: local code paths become S3 URIs (the translator accepts only those).
    for resource in template.get("Resources", {}).values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str) and not properties[key].startswith("s3://"):
                properties[key] = f"s3://placeholder-bucket/{properties[key].strip('/')}"
    return dict(transform(template, {}, _NoManagedPolicies()))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("template", nargs="?", type=Path, default=Path(__file__).resolve().parents[2] / "template.yaml")
    parser.add_argument("--deployed", nargs="*", metavar="NAME=VALUE", help="apply the parameters (defaults + these)")
    arguments = parser.parse_args(argv[1:])
    template = transform_template(arguments.template)
    if arguments.deployed is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from cfn_conditions import deployed

        template = deployed(template, dict(item.split("=", 1) for item in arguments.deployed))
    json.dump(template, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
