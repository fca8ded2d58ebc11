"""``tidelog topics --describe`` (the real CLI, in a subprocess) against a real ``tidelog
serve`` process tiering to a directory: a topic with remote.storage.enable shows its remote
log start, local log start (ListOffsets -4) and highest tiered offset (-5) per partition; a
topic without it shows Kafka's columns only."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FS_BACKEND = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
    "remote.log.manager.task.interval.ms": "100",
    "log.retention.check.interval.ms": "100",
    "log.initial.task.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
}
COLUMNS = re.compile(r"Partition: (\d+)\t.*\tRemoteLogStartOffset: (-?\d+)\t"
                     r"LocalLogStartOffset: (-?\d+)\tHighestTieredOffset: (-?\d+)$")


def _describe(bootstrap: str, topic: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "topics", "--describe", "--topic", topic,
         "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _tiered_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int, int]]:
    found = {}
    for line in _describe(bootstrap, topic).splitlines():
        m = COLUMNS.search(line)
        if m:
            found[int(m[1])] = (int(m[2]), int(m[3]), int(m[4]))
    return found


def test_describe_shows_remote_and_local_log_start_and_highest_tiered(tmp_path: Path) -> None:
    (tmp_path / "remote").mkdir()
    proc = ServeProcess(tmp_path / "logs", {
        **TIERED, "rsm.config.storage.backend.class": FS_BACKEND,
        "rsm.config.storage.root": str(tmp_path / "remote")}).start()
    try:
        bootstrap = proc.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([
            NewTopic("tiered", 2, 1, config={
                "remote.storage.enable": "true", "segment.bytes": "4096", "retention.ms": "-1",
                "local.retention.bytes": "1"}),
            NewTopic("plain", 1, 1)])
        for f in futures.values():
            f.result(30)
        before = _tiered_offsets(bootstrap, "tiered")
        assert before == {0: (0, 0, -1), 1: (0, 0, -1)}  # nothing tiered yet
        producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(80):
            producer.produce("tiered", value=b"%06d" % i + b"v" * 194, partition=0)
            producer.flush(30)  # one batch per record: several segments
        deadline = time.monotonic() + 60
        while True:
            now = _tiered_offsets(bootstrap, "tiered")
            remote_start, local_start, tiered = now[0]
            # local retention keeps the active segment only, once every closed one is copied
            if local_start > 0 and tiered == local_start - 1:
                break
            assert time.monotonic() < deadline, f"never tiered: {now}"
            time.sleep(0.3)
        assert remote_start == 0  # retention.ms=-1: the remote log starts at offset 0
        assert 0 < local_start < 80
        assert now[1] == (0, 0, -1)  # the other partition has nothing
        plain = _describe(bootstrap, "plain")
        assert "Partition: 0" in plain and "RemoteLogStartOffset" not in plain
    finally:
        rc = proc.stop()
    assert rc == 0, "".join(proc.stderr_lines[-30:])
