"""Soak (``-m slow``): a tiered topic under load while S3 (SeaweedFS behind a proxy) goes
down and comes back and the broker is SIGKILLed at random moments, uploads included. After
the last heal: librdkafka reads every acknowledged record from offset 0 once and in order,
every acknowledged record is in a finished remote segment or on local disk at its offset
with its value, nothing is listed twice as finished, no range has a gap, and
no object of an upload that never finished is left. The seed is printed."""

from __future__ import annotations

import os
import random
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from s3_proxy import StallingProxy
from serve_process import ServeProcess
from test_tiered_storage import (
    TIERED,
    _consume_confluent,
    _create_topic,
    _metadata_events,
    _wait,
)

from tidelog.records.batch import iter_batches
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    uuid_to_str,
)

ck = pytest.importorskip("confluent_kafka")
TOPIC = "tiered"


def _produce(bootstrap: str, start: int, n: int) -> dict[int, bytes]:
    acked: dict[int, bytes] = {}
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                            "batch.size": 1500,  # below segment.bytes (4096)
                            "enable.idempotence": True, "message.timeout.ms": 20000})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()

    for i in range(start, start + n):
        producer.produce(TOPIC, value=b"%08d" % i + b"x" * 150, callback=done)
        producer.poll(0)
    producer.flush(30)
    return acked


def _finished(events: list[object]) -> list[RemoteLogSegmentMetadata]:
    started = {e.remote_log_segment_id: e for e in events
               if isinstance(e, RemoteLogSegmentMetadata)}
    last: dict[object, RemoteLogSegmentState] = {}
    for e in events:
        if isinstance(e, RemoteLogSegmentMetadataUpdate):
            last[e.remote_log_segment_id] = e.state
    return sorted((m for sid, m in started.items()
                   if last.get(sid) is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
                  key=lambda m: m.start_offset)


@pytest.mark.slow
def test_tiering_under_s3_outages_and_kills(tmp_path: Path, s3_server: Any,
                                            s3_bucket: Any) -> None:
    seed = int(os.environ.get("TIDELOG_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    proxy = StallingProxy(s3_server.s3_port)
    s3 = s3_server.client()
    props = {**TIERED, **s3_bucket.rsm_configs,
             "rsm.config.storage.s3.endpoint.url": proxy.endpoint_url}
    logs = tmp_path / "logs"
    proc = ServeProcess(logs, props).start()
    acked: dict[int, bytes] = {}
    try:
        _create_topic(proc.bootstrap_servers)
        for rnd in range(12):
            acked.update(_produce(proc.bootstrap_servers, rnd * 200, 200))
            fault = rng.choice(["outage", "kill", "kill-mid-upload", "none"])
            if fault == "outage":
                proxy.stall_after(0)
                acked.update(_produce(proc.bootstrap_servers, rnd * 200 + 100_000, 50))
                time.sleep(rng.uniform(0.5, 3))  # S3 down a while (wall time: the fault)
                proxy.resume()
            elif fault.startswith("kill"):
                if fault == "kill-mid-upload":
                    proxy.stall_after(rng.randrange(200, 4000))
                    proxy.stalled.wait(10)
                proc.kill()
                proxy.resume()
                proc = ServeProcess(logs, props).start()
        proxy.resume()
        events: list[object] = []

        def settled() -> bool:
            nonlocal events
            events = _metadata_events(proc.bootstrap_servers)
            ids = {uuid_to_str(e.remote_log_segment_id.id) for e in events
                   if isinstance(e, RemoteLogSegmentMetadata)}
            finished = {uuid_to_str(m.remote_log_segment_id.id) for m in _finished(events)}
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket.name)
                    .get("Contents", [])]
            on_s3 = {k.rsplit("/", 1)[1][21:].split(".", 1)[0] for k in keys}
            return on_s3 <= finished and bool(finished) and finished <= ids

        try:
            _wait("no object of an unfinished upload left", settled, timeout=120)
            end = max(acked) + 1
            consumed = _consume_confluent(proc.bootstrap_servers, end)
            offsets = [o for o, _ in consumed]
            assert offsets == sorted(set(offsets)), f"seed {seed}: out of order or twice"
            by_offset = dict(consumed)
            missing = [o for o, v in acked.items() if by_offset.get(o) != v]
            assert not missing, f"seed {seed}: not read back from offset 0: {missing[:10]}"
        except BaseException:
            print("".join(line for line in proc.stderr_lines
                          if "remote" in line or "WARN" in line or "ERROR" in line)[-6000:])
            raise
    finally:
        proxy.close()
        rc = proc.stop()
    assert rc == 0
    finished = _finished(events)
    starts = [m.start_offset for m in finished]
    assert len(starts) == len(set(starts)), starts
    for a, b in pairwise(finished):
        assert b.start_offset == a.end_offset + 1, (a, b)
    found: dict[int, bytes] = {}
    for m in finished:
        key = next(o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket.name)["Contents"]
                   if uuid_to_str(m.remote_log_segment_id.id) in o["Key"]
                   and o["Key"].endswith(".log"))
        data = s3.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
        for batch in iter_batches(data):
            for rec in batch:
                assert rec.offset not in found, rec.offset
                found[rec.offset] = bytes(rec.value or b"")
    for p in sorted((logs / f"{TOPIC}-0").glob("*.log")):
        for batch in iter_batches(p.read_bytes()):
            for rec in batch:
                found.setdefault(rec.offset, bytes(rec.value or b""))
    lost = [o for o, v in acked.items() if found.get(o) != v]
    assert not lost, f"seed {seed}: acknowledged records missing or changed: {lost[:10]}"
