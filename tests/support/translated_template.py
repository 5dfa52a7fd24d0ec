"""template.yaml as `sam deploy` submits it: translated by AWS's SAM translator (from .venv-sam)."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAM_PYTHON = REPO / ".venv-sam" / "bin" / "python"
TRANSFORM = Path(__file__).with_name("sam_transform.py")


@cache
def translated_template() -> dict[str, Any]:
    """The CloudFormation template SAM deploys; raises AssertionError with the translator's words if it refuses."""
    result = subprocess.run(
        [str(SAM_PYTHON), str(TRANSFORM), str(REPO / "template.yaml")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"},
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"the SAM translator refused template.yaml:\n{result.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(result.stdout)
    return data
