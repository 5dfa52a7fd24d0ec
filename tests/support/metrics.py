"""Metrics recorded instead of written: what a handler or a wrapped driver emitted, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.observability.metrics import MetricUnit


@dataclass
class RecordedMetrics:
    """A `scheduler.observability.metrics.Metrics` that keeps each data point."""

    points: list[tuple[str, float, dict[str, str]]] = field(default_factory=list)

    def emit(self, name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
        self.points.append((name, value, dict(dimensions)))

    def names(self) -> list[str]:
        """The metric names, in the order emitted."""
        return [name for name, _, _ in self.points]

    def of(self, name: str) -> list[dict[str, Any]]:
        """Each data point of `name`: its dimensions and value."""
        return [{**dimensions, "value": value} for metric, value, dimensions in self.points if metric == name]
