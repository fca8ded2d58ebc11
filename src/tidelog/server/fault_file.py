"""Faults on demand for a broker in another process (``tidelog serve``, the cluster fixture).

With ``tidelog.fault.plan.file`` set (testing only; ``{broker.id}`` in the path is replaced by
the broker's id, so one cluster setting gives each broker its own file), the broker follows
that file: each line is one JSON call on its ``FaultPlan`` (``{"op": "fail_produce", "args":
{...}}``), applied in order. The broker writes how many lines it applied to ``<file>.applied``
and appends each fault that fired to ``<file>.injected``. ``FaultPlanFile`` is the test's
side: its calls mirror ``FaultPlan``'s and each returns once the broker applied it, so a test
is as deterministic against a process as against an ``EmbeddedBroker``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from tidelog.config.fault_config import FAULT_PLAN_FILE as FAULT_PLAN_FILE  # its old home
from tidelog.protocol.errors import ErrorCode

from .faults import FaultPlan, InjectedFault

log = logging.getLogger(__name__)

OPS = frozenset({"fail_produce", "fail_requests", "delay_responses", "drop_connection_after",
                 "advance_clock", "fill_log_dir", "free_log_dir", "clear"})  # fmt: skip
POLL_S = 0.02


def plan_path(configured: str, broker_id: int) -> Path:
    return Path(configured.replace("{broker.id}", str(broker_id)))


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


class PlanFollower:
    """The broker's side: applies the file's new lines to ``plan``, reports back."""

    def __init__(self, plan: FaultPlan, path: Path) -> None:
        self.plan = plan
        self.path = path
        self._offset = 0
        self._applied = 0
        self._reported = 0

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            data = b""
        end = data.rfind(b"\n") + 1  # whole lines only: a writer may be mid-line
        for line in data[:end].splitlines():
            if line.strip():
                try:
                    self._apply(json.loads(line))
                except (ValueError, TypeError) as exc:  # said once, then the next line
                    log.error("fault plan %s: cannot apply %r: %s", self.path, line, exc)
                    self._applied += 1
        if end:
            self._offset += end
            _write_atomic(_sidecar(self.path, ".applied"), f"{self._applied}\n")
        self._report()

    def _apply(self, call: dict[str, Any]) -> None:
        op = call.get("op")
        if op not in OPS:
            raise ValueError(f"not a fault plan call: {op!r}")
        getattr(self.plan, op)(**call.get("args", {}))
        self._applied += 1

    def _report(self) -> None:
        fired = self.plan.injected[self._reported:]
        if fired:
            with open(_sidecar(self.path, ".injected"), "a") as f:
                for fault in fired:
                    f.write(json.dumps([fault.kind, fault.api_key, fault.detail]) + "\n")
            self._reported += len(fired)


async def follow(follower: PlanFollower) -> None:
    """Poll the file until cancelled (the broker's loop: applying is quick)."""
    while True:
        follower.poll()
        await asyncio.sleep(POLL_S)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class FaultPlanFile:
    """The test's side of a followed plan file: ``FaultPlan``'s calls, each returning once the
    broker applied it (``timeout`` seconds at most)."""

    def __init__(self, path: str | Path, timeout: float = 30) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._written = sum(1 for ln in self._lines(self.path) if ln.strip())

    @staticmethod
    def _lines(path: Path) -> list[str]:
        try:
            return path.read_text().splitlines()
        except FileNotFoundError:
            return []

    def _call(self, op: str, **args: Any) -> FaultPlanFile:
        with open(self.path, "a") as f:
            f.write(json.dumps({"op": op, "args": args}) + "\n")
        self._written += 1
        deadline = time.monotonic() + self.timeout
        while self.applied < self._written:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the broker did not apply {op} from {self.path}")
            time.sleep(POLL_S)
        return self

    @property
    def applied(self) -> int:
        lines = self._lines(_sidecar(self.path, ".applied"))
        return int(lines[0]) if lines else 0

    @property
    def injected(self) -> list[InjectedFault]:
        return [InjectedFault(*json.loads(ln)) for ln in self._lines(_sidecar(self.path, ".injected"))]

    def fail_produce(self, topic: str, partition: int = 0,
                     error: int = ErrorCode.NOT_LEADER_OR_FOLLOWER, times: int = 1) -> FaultPlanFile:
        return self._call("fail_produce", topic=topic, partition=partition, error=int(error),
                          times=times)  # fmt: skip

    def fail_requests(self, api_key: int, error: int, times: int = 1) -> FaultPlanFile:
        return self._call("fail_requests", api_key=api_key, error=int(error), times=times)

    def delay_responses(self, api_key: int, ms: int, times: int | None = None) -> FaultPlanFile:
        return self._call("delay_responses", api_key=api_key, ms=ms, times=times)

    def drop_connection_after(self, requests: int, api_key: int | None = None) -> FaultPlanFile:
        return self._call("drop_connection_after", requests=requests, api_key=api_key)

    def advance_clock(self, ms: int) -> FaultPlanFile:
        return self._call("advance_clock", ms=ms)

    def fill_log_dir(self, path: str | Path, free_bytes: int | None = None) -> FaultPlanFile:
        return self._call("fill_log_dir", path=str(path), free_bytes=free_bytes)

    def free_log_dir(self, path: str | Path) -> FaultPlanFile:
        return self._call("free_log_dir", path=str(path))

    def clear(self) -> FaultPlanFile:
        return self._call("clear")
