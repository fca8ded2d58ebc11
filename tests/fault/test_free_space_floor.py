"""The free-space floor on a real full disk: a 64 MiB loop-mounted ext4 log dir with
``log.dir.min.free.bytes`` = 16 MiB, filled by three idempotent acks=all producers (root;
skipped with the reason elsewhere, a failure under CI).

The broker never exits; the produce error is NOT_ENOUGH_REPLICAS, which librdkafka,
kafka-python and aiokafka retry; a consumer reads every acknowledged record while the dir is
degraded and commits its offsets; once DeleteRecords frees space the same producer instances
resume by themselves; at the end every acknowledged record was read exactly once."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiokafka.errors
import confluent_kafka as ck
import confluent_kafka.admin as cka
import kafka.errors

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import Wire, produce_body
from fault_loopfs import loop_fs
from serve_process import ServeProcess

from tidelog.records.builder import build_batch

TOPIC = "floor"
PARTITIONS = 3
NOT_ENOUGH_REPLICAS = 19
MiB = 1 << 20
VALUE = b"x" * 2000


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Producers:
    """Three idempotent acks=all producers sending distinct values until stopped; the same
    instances run through the degraded period."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(3)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(180)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def _done(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked.add(msg.value())
            else:
                self.errors.append(str(err))

    def _run(self, i: int) -> None:
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 300000,
                         "retry.backoff.ms": 100, "queue.buffering.max.messages": 2000})  # fmt: skip
        k = 0
        while not self.stop.is_set():
            try:
                p.produce(TOPIC, b"%d-%d-" % (i, k) + VALUE, partition=k % PARTITIONS,
                          on_delivery=self._done)  # fmt: skip
                k += 1
            except BufferError:  # the queue is full while the dir is degraded: wait
                p.poll(0.1)
            p.poll(0)
        assert p.flush(240) == 0


def _consume(bootstrap: str, upto: dict[int, int], seen: list[bytes]) -> None:
    """As group ``verify``, from its committed offsets (or the beginning) up to ``upto``;
    then commit."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    parts = [ck.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    c.assign(parts)
    following = {tp.partition: max(tp.offset, 0) for tp in c.committed(parts, timeout=30)}
    deadline = time.monotonic() + 120
    try:
        while any(following[p] < upto[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, (following, upto)
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    seen.append(m.value())
                    following[m.partition()] = m.offset() + 1
        committed = c.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed)
    finally:
        c.close()


def _high_watermarks(bootstrap: str) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return {p: c.get_watermark_offsets(ck.TopicPartition(TOPIC, p), 10)[1]
                for p in range(PARTITIONS)}  # fmt: skip
    finally:
        c.close()


def _logged(sp: ServeProcess, text: str) -> bool:
    return any(text in line for line in list(sp.stderr_lines))


def test_a_full_log_dir_degrades_and_recovers_without_a_restart(tmp_path: Path) -> None:
    with loop_fs(tmp_path, "ext4", size_mb=64) as fs:
        data = fs.mountpoint / "data"
        sp = ServeProcess(data, {"log.dir.min.free.bytes": str(16 * MiB),
                                 "log.segment.bytes": str(1 * MiB),
                                 "log.segment.delete.delay.ms": "0",
                                 "offsets.topic.segment.bytes": str(1 * MiB)}).start()  # fmt: skip
        try:
            admin = cka.AdminClient({"bootstrap.servers": sp.bootstrap_servers})
            admin.create_topics([cka.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
            load = Producers(sp.bootstrap_servers)
            load.start()
            wait_for(lambda: _logged(sp, "is at its free-space floor"), "the dir to degrade")

            # degraded: acknowledgements stop, the broker stays up, the error is retriable
            with Wire(sp) as wire:  # type: ignore[arg-type]
                body = produce_body(9, TOPIC, {0: build_batch([(0, None, b"probe")])}, acks=-1)
                resp: Any = wire.call(0, 9, body=body)
            code = resp.responses[0].partition_responses[0].error_code
            assert code == NOT_ENOUGH_REPLICAS, code  # librdkafka: RETRY, MSG_NOT_PERSISTED
            assert kafka.errors.for_code(code).retriable
            assert aiokafka.errors.for_code(code).retriable
            assert sp.proc is not None and sp.proc.poll() is None

            # reads and commits go on: every record acknowledged so far is read
            acked_before = set(load.acked)
            first: list[bytes] = []
            _consume(sp.bootstrap_servers, _high_watermarks(sp.bootstrap_servers), first)
            assert acked_before <= set(first)
            assert not _logged(sp, "room above log.dir.min.free.bytes again")

            # DeleteRecords frees space: the same producers resume by themselves
            hw = _high_watermarks(sp.bootstrap_servers)
            deleted = admin.delete_records([ck.TopicPartition(TOPIC, p, o) for p, o in hw.items()])
            for fut in deleted.values():
                fut.result(30)
            resumed_at = load.count()
            wait_for(lambda: _logged(sp, "room above log.dir.min.free.bytes again"), "writes back")
            wait_for(lambda: load.count() > resumed_at + 3000, "the producers to resume")
            load.join()
            assert not load.errors, load.errors[:5]
            assert sp.proc.poll() is None, "the broker must never exit"

            rest: list[bytes] = []
            _consume(sp.bootstrap_servers, _high_watermarks(sp.bootstrap_servers), rest)
            assert sp.stop() == 0
        finally:
            if sp.proc is not None and sp.proc.poll() is None:
                sp.kill()
    read = first + rest
    assert len(read) == len(set(read)), "a record was read twice"
    missing = load.acked - set(read)
    assert not missing, f"{len(missing)} of {len(load.acked)} acknowledged records missing"
    offline = [ln for ln in sp.stderr_lines if "is offline" in ln or "Traceback" in ln]
    assert not offline, offline
    print(f"acked {len(load.acked)}; read while degraded {len(first)} (acked then: "
          f"{len(acked_before)}), after DeleteRecords {len(rest)}")
