"""The broker under disk faults, on real file systems mounted by the test (root; skipped with
the reason elsewhere): a full disk under idempotent acks=all load from several producers and
an xfs file system shut down under the broker (EIO). The failed log dir goes offline once (one
ERROR line, no tracebacks), its partitions answer KAFKA_STORAGE_ERROR and are offline in
Metadata, DescribeLogDirs reports the dir's error, the other dir keeps serving, and after the
fault is fixed a restart finds every acknowledged record exactly once. With every dir offline
the broker shuts down cleanly."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import Wire, produce_body
from fault_loopfs import loop_fs
from serve_process import ServeProcess

from tidelog.protocol.codec import request_class
from tidelog.protocol.kio_util import make, nested

KAFKA_STORAGE_ERROR = 56
LEADER_NOT_AVAILABLE = 5
TOPIC = "faulty"
PARTITIONS = 4
VALUE = b"x" * 2000


def _broker(healthy: Path, failing: Path, **extra: str) -> ServeProcess:
    # The healthy dir comes first: it holds the broker's topic metadata.
    dirs = f"{healthy},{failing}" if healthy != failing else str(failing)
    overrides = {"log.dirs": dirs, "log.segment.bytes": str(2 * 1024 * 1024), **extra}
    return ServeProcess(healthy, overrides)


def _create_topic(bootstrap: str) -> None:
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([cka.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)


def _dirs_of_partitions(*dirs: Path) -> dict[int, Path]:
    out = {}
    for d in dirs:
        for p in range(PARTITIONS):
            if (d / f"{TOPIC}-{p}").is_dir():
                out[p] = d
    return out


class _Load:
    """Idempotent acks=all producers, each sending distinct values round robin over the
    partitions, remembering which were acknowledged."""

    def __init__(self, bootstrap: str, producers: int, per_producer: int, tag: bytes = b"") -> None:
        self.bootstrap = bootstrap
        self.tag = tag
        self.acked: list[tuple[int, bytes]] = []
        self.failed = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i, per_producer)) for i in range(producers)
        ]

    def _run(self, i: int, n: int) -> None:
        import confluent_kafka as ck

        p = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 8000,
            }
        )

        def done(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.acked.append((msg.partition(), msg.value()))
                else:
                    self.failed += 1

        for k in range(n):
            value = self.tag + b"%d-%d-" % (i, k) + VALUE
            while True:
                try:
                    p.produce(TOPIC, value, partition=k % PARTITIONS, on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        p.flush(60)

    def run(self) -> None:
        for t in self._threads:
            t.start()
        for t in self._threads:
            t.join()


def _consume_all(bootstrap: str) -> list[tuple[int, bytes]]:
    import confluent_kafka as ck

    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False}
    )
    c.assign([ck.TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: list[tuple[int, bytes]] = []
    idle = 0
    try:
        while idle < 3:
            msgs = c.consume(1000, 2)
            idle = 0 if msgs else idle + 1
            out.extend((m.partition(), m.value()) for m in msgs if m.error() is None)
    finally:
        c.close()
    return out


def _produce_codes(wire: Wire, partitions: list[int]) -> dict[int, int]:
    from tidelog.records.builder import build_batch

    batch = build_batch([(int(time.time() * 1000), None, b"probe")])
    body = produce_body(9, TOPIC, {p: batch for p in partitions}, acks=-1)
    resp: Any = wire.call(0, 9, body=body)
    return {int(p.index): int(p.error_code) for t in resp.responses for p in t.partition_responses}


def _metadata(wire: Wire) -> Any:
    cls = request_class(3, 12)
    topics = (make(nested(cls, "topics"), name=TOPIC, topic_id=uuid.UUID(int=0)),)
    body = make(
        cls,
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return wire.call(3, 12, body=body)


def _describe_log_dirs(wire: Wire) -> Any:
    return wire.call(35, 4, body=make(request_class(35, 4), topics=None))


def _check_offline(sp: ServeProcess, failing: Path, offline: set[int]) -> None:
    """Produce, Metadata and DescribeLogDirs all say which partitions/dir failed."""
    with Wire(sp) as wire:  # type: ignore[arg-type]
        codes = _produce_codes(wire, list(range(PARTITIONS)))
        for p in range(PARTITIONS):
            assert (codes[p] == KAFKA_STORAGE_ERROR) == (p in offline), (codes, "".join(sp.stderr_lines[-40:]))
        md = _metadata(wire)
        parts = {int(p.partition_index): p for p in md.topics[0].partitions}
        for p, part in parts.items():
            if p in offline:
                assert part.error_code == LEADER_NOT_AVAILABLE and part.leader_id == -1
                assert list(part.offline_replicas) == [1] and list(part.isr_nodes) == []
            else:
                assert part.error_code == 0 and list(part.offline_replicas) == []
        dirs = _describe_log_dirs(wire)
        errors = {Path(r.log_dir): int(r.error_code) for r in dirs.results}
        assert errors[failing.resolve()] == KAFKA_STORAGE_ERROR, errors


def _error_lines(sp: ServeProcess) -> list[str]:
    return [ln for ln in sp.stderr_lines if " ERROR " in ln or "Traceback" in ln]


def test_full_disk_under_idempotent_load(tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    with loop_fs(tmp_path, "ext4", size_mb=12) as fs:
        failing = fs.mountpoint / "data"
        # no free-space floor: the append that meets ENOSPC takes the dir offline, as in Kafka
        sp = _broker(healthy, failing, **{"node.id": "1", "log.dir.min.free.bytes": "0"}).start()
        try:
            _create_topic(sp.bootstrap_servers)
            placed = _dirs_of_partitions(healthy, failing)
            offline = {p for p, d in placed.items() if d == failing}
            assert offline and len(offline) < PARTITIONS, placed
            # ~24 MB offered to a 12 MiB file system: the failing dir fills up mid-load.
            load = _Load(sp.bootstrap_servers, producers=3, per_producer=4000)
            load.run()
            assert sp.proc is not None and sp.proc.poll() is None, "the broker must stay up"
            assert load.acked and load.failed, (len(load.acked), load.failed)
            _check_offline(sp, failing, offline)
            errors = _error_lines(sp)
            assert not [ln for ln in errors if "Traceback" in ln], errors
            dir_errors = [ln for ln in errors if "is offline" in ln]
            assert len(dir_errors) == 1 and str(failing) in dir_errors[0], errors
            assert "No space left on device" in dir_errors[0], dir_errors
            assert sp.stop() == 0
            assert any("later failures/refusals" in ln for ln in sp.stderr_lines)
            fs.grow(64)  # the operator frees space
            sp2 = _broker(healthy, failing, **{"node.id": "1"}).start()
            try:
                got = _consume_all(sp2.bootstrap_servers)
            finally:
                sp2.stop()
        finally:
            if sp.proc is not None and sp.proc.poll() is None:
                sp.kill()
    values = [v for _, v in got if v != b"probe"]
    assert len(values) == len(set(values)), "a record was stored twice"
    missing = set(load.acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost"


def test_xfs_shutdown_eio_takes_the_dir_offline(tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    with loop_fs(tmp_path, "xfs") as fs:
        failing = fs.mountpoint / "data"
        # A dead disk loses its page cache: only fsynced records survive it, so every append
        # is flushed here (a single node has no replicas to keep an acknowledged record).
        flushed = {"node.id": "1", "log.flush.interval.messages": "1"}
        sp = _broker(healthy, failing, **flushed).start()
        try:
            _create_topic(sp.bootstrap_servers)
            placed = _dirs_of_partitions(healthy, failing)
            offline = {p for p, d in placed.items() if d == failing}
            before = _Load(sp.bootstrap_servers, producers=2, per_producer=200)
            before.run()
            assert before.failed == 0 and len(before.acked) == 400
            fs.shutdown()  # every later write, fsync and read on it fails with EIO
            after = _Load(sp.bootstrap_servers, producers=2, per_producer=40, tag=b"after-")
            after.run()
            assert sp.proc is not None and sp.proc.poll() is None
            _check_offline(sp, failing, offline)
            dir_errors = [ln for ln in _error_lines(sp) if "is offline" in ln]
            assert len(dir_errors) == 1 and "Input/output error" in dir_errors[0], dir_errors
            assert not [ln for ln in _error_lines(sp) if "Traceback" in ln]
            healthy_acked = [v for p, v in after.acked if p not in offline]
            assert healthy_acked, "the healthy dir must keep serving"
            assert sp.stop() == 0
            fs.cycle()
            sp2 = _broker(healthy, failing, **flushed).start()
            try:
                got = _consume_all(sp2.bootstrap_servers)
            finally:
                sp2.stop()
        finally:
            if sp.proc is not None and sp.proc.poll() is None:
                sp.kill()
    values = [v for _, v in got if v != b"probe"]
    assert len(values) == len(set(values))
    assert not (set(before.acked) | set(after.acked)) - set(got)


def test_all_dirs_offline_shuts_the_broker_down_cleanly(tmp_path: Path) -> None:
    with loop_fs(tmp_path, "xfs") as fs:
        only = fs.mountpoint / "data"
        sp = _broker(only, only).start()
        try:
            _create_topic(sp.bootstrap_servers)
            fs.shutdown()
            with Wire(sp) as wire:  # type: ignore[arg-type]
                try:  # the write that finds the last dir dead may not get its answer out
                    code = _produce_codes(wire, [0])[0]
                    assert code == KAFKA_STORAGE_ERROR, "".join(sp.stderr_lines)
                except ConnectionError:
                    pass
            assert sp.proc is not None
            rc = sp.proc.wait(30)  # no signal sent: the broker stops by itself
        finally:
            if sp.proc is not None and sp.proc.poll() is None:
                sp.kill()
    text = "".join(sp.stderr_lines)
    assert rc == 1, text
    assert "Shutdown broker because all log dirs" in text
    assert "tidelog broker" in text and "stopped" in text
    assert "Traceback" not in text


def test_loop_helper_unmounts(tmp_path: Path) -> None:
    with loop_fs(tmp_path, "ext4") as fs:
        (fs.mountpoint / "f").write_bytes(b"1")
    assert not (fs.mountpoint / "f").exists()
