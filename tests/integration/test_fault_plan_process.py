"""Faults on demand for a broker in another process: ``tidelog serve`` with
``tidelog.fault.plan.file`` follows the calls a test writes with ``FaultPlanFile``; each call
returns once the broker applied it, so the faults fire as deterministically as in-process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import confluent_kafka.admin
from serve_process import ServeProcess

from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.server.fault_file import FaultPlanFile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import Wire, produce_body

TS = 1_700_000_000_000


def _produce(w: Wire, topic: str, parts: dict[int, bytes]) -> dict[int, Any]:
    resp: Any = w.call(0, 9, body=produce_body(9, topic, parts))
    return {p.index: p for t in resp.responses for p in t.partition_responses}


def test_a_serve_process_injects_what_the_plan_file_says(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    sp = ServeProcess(logs, {"tidelog.fault.plan.file": str(tmp_path / "faults-{broker.id}.jsonl"),
                             "log.dir.min.free.bytes": str(1 << 20)}).start()  # fmt: skip
    try:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": sp.bootstrap_servers})
        admin.create_topics([confluent_kafka.admin.NewTopic("t", 2, 1)])["t"].result(30)
        plan = FaultPlanFile(tmp_path / "faults-1.jsonl")  # broker id 1: tidelog's default
        plan.fail_produce("t", 0, ErrorCode.NOT_ENOUGH_REPLICAS, times=2)
        batch = build_batch([(TS, b"k", b"v")])
        with Wire(sp) as w:  # type: ignore[arg-type]
            for attempt in range(2):
                got = _produce(w, "t", {0: batch, 1: batch})
                assert got[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
                assert (got[1].error_code, got[1].base_offset) == (0, attempt)
            assert _produce(w, "t", {0: batch})[0].base_offset == 0  # spent
            plan.fill_log_dir(logs)  # the dir reads as full: a degraded broker, no restart
            assert _produce(w, "t", {0: batch})[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            plan.free_log_dir(logs)
            assert _produce(w, "t", {0: batch})[0].base_offset == 1
        assert [f.detail for f in plan.injected] == ["t-0: NOT_ENOUGH_REPLICAS"] * 2
        assert plan.applied == 3
        assert any("Following the fault plan" in ln for ln in sp.stderr_lines)
    finally:
        assert sp.stop() == 0
