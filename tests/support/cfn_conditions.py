"""A CloudFormation template with its parameters applied: the resources and properties a stack would get.

Evaluates what decides whether something exists — Conditions (Fn::Equals, Fn::Not, Fn::And, Fn::Or,
Condition), resource Conditions, Fn::If and AWS::NoValue — with the parameters' defaults and any
overrides; Ref to a parameter becomes its value. Every other intrinsic function is left as it is.
Standard library only: it also runs in .venv-sam (tests/support/sam_transform.py --parameters).
"""

from __future__ import annotations

from typing import Any

_NO_VALUE = {"Ref": "AWS::NoValue"}


class _Dropped:
    """What AWS::NoValue and the false side of a resource Condition leave: nothing."""


DROPPED = _Dropped()


def parameter_values(template: dict[str, Any], overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """Each parameter's value as CloudFormation passes it: the override, else the default."""
    values: dict[str, Any] = {}
    for name, definition in template.get("Parameters", {}).items():
        if name in (overrides or {}):
            value: Any = (overrides or {})[name]
        elif "Default" in definition:
            value = definition["Default"]
        else:
            continue
        if definition.get("Type") == "CommaDelimitedList" and isinstance(value, str):
            value = value.split(",") if value else [""]
        values[name] = value
    unknown = set(overrides or {}) - set(template.get("Parameters", {}))
    if unknown:
        raise KeyError(f"no such parameter: {', '.join(sorted(unknown))}")
    return values


def deployed(template: dict[str, Any], overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """The template as a stack with these parameters would have it: conditions decided, NoValue removed."""
    resolver = _Resolver(template, parameter_values(template, overrides))
    result = dict(template)
    result["Resources"] = {
        name: resolver.value(resource)
        for name, resource in template.get("Resources", {}).items()
        if resolver.condition(resource.get("Condition", True))
    }
    if "Outputs" in template:
        result["Outputs"] = {
            name: resolver.value(output)
            for name, output in template["Outputs"].items()
            if resolver.condition(output.get("Condition", True))
        }
    return result


class _Resolver:
    def __init__(self, template: dict[str, Any], parameters: dict[str, Any]) -> None:
        self._conditions = template.get("Conditions", {})
        self._parameters = parameters
        self._decided: dict[str, bool] = {}

    def condition(self, expression: Any) -> bool:
        if expression is True:
            return True
        if isinstance(expression, str):
            if expression not in self._decided:
                self._decided[expression] = self.condition(self._conditions[expression])
            return self._decided[expression]
        ((function, arguments),) = expression.items()
        if function == "Condition":
            return self.condition(arguments)
        if function == "Fn::Equals":
            left, right = (self._scalar(argument) for argument in arguments)
            return left == right
        if function == "Fn::Not":
            return not self.condition(arguments[0])
        if function == "Fn::And":
            return all(self.condition(argument) for argument in arguments)
        if function == "Fn::Or":
            return any(self.condition(argument) for argument in arguments)
        raise ValueError(f"cannot decide the condition {expression!r}")

    def _scalar(self, value: Any) -> Any:
        """A condition operand as CloudFormation compares it: a string (or a list of them)."""
        value = self.value(value)
        if isinstance(value, dict) and set(value) == {"Fn::Join"}:
            separator, items = value["Fn::Join"]
            return separator.join(str(item) for item in self.value(items))
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, int | float):
            return str(value)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.value(item) for item in value]
            return [item for item in items if item is not DROPPED]
        if not isinstance(value, dict):
            return value
        if value == _NO_VALUE:
            return DROPPED
        if set(value) == {"Ref"} and value["Ref"] in self._parameters:
            return self._parameters[value["Ref"]]
        if set(value) == {"Fn::If"}:
            name, when_true, when_false = value["Fn::If"]
            return self.value(when_true if self.condition(name) else when_false)
        resolved = {key: self.value(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not DROPPED}
