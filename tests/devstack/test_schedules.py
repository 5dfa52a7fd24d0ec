"""`make run`'s EventBridge schedules: a rate rule fires start to start, whatever each run takes."""

from __future__ import annotations

from typing import Any

from devstack.schedules import Schedule


class _Time:
    """A clock the stop event and the function move forward; the stack stops after `runs` runs."""

    def __init__(self, run_seconds: float, runs: int) -> None:
        self.now = 0.0
        self.run_seconds = run_seconds
        self.runs = runs
        self.started: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:  # threading.Event.wait: True once stopped
        self.now += seconds
        return len(self.started) >= self.runs

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        self.started.append(self.now)
        self.now += self.run_seconds


def _run(run_seconds: float, runs: int = 4) -> list[float]:
    time = _Time(run_seconds, runs)
    Schedule(time, "SweepExpiredFunction", 5.0).run(time, clock=time.clock)  # type: ignore[arg-type]
    return time.started


def test_runs_start_one_interval_apart_however_long_each_takes() -> None:
    assert _run(run_seconds=2.0) == [5.0, 10.0, 15.0, 20.0]


def test_a_run_longer_than_the_interval_is_followed_at_once_by_the_next() -> None:
    assert _run(run_seconds=7.0) == [5.0, 12.0, 19.0, 26.0]
