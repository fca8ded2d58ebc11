"""``tidelog produce`` on piped input hands each read's whole lines to librdkafka in one
produce_batch call: against a real broker every line lands once and in order even with a
local queue far smaller than a read (the queue-full rest is produced again after delivery
reports are served), keys are parsed as before, and a record librdkafka refuses is reported
as Kafka's tool reports it while the others are sent."""

from __future__ import annotations

import subprocess
import sys

import confluent_kafka as ck

from tidelog.testing import EmbeddedBroker

TIDELOG = [sys.executable, "-m", "tidelog.cli.main"]


def produce(bootstrap: str, topic: str, stdin: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*TIDELOG, "produce", "--bootstrap-server", bootstrap, "--topic", topic,
                           *extra], input=stdin, capture_output=True, timeout=120)  # fmt: skip


def read_back(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    """(key, value) of every record of partition 0, up to the high watermark."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                     "enable.auto.commit": False})  # fmt: skip
    try:
        tp = ck.TopicPartition(topic, 0, 0)
        _, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([tp])
        got: list[ck.Message] = []
        while len(got) < high:
            got += [m for m in c.consume(high - len(got), 5) if m.error() is None]
        assert [m.offset() for m in got] == list(range(high))
        return [(m.key(), m.value()) for m in got]
    finally:
        c.close()


def test_a_queue_smaller_than_a_read_loses_nothing(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    lines = [f"line-{i:06d}".encode() for i in range(5_000)]  # one read: 100 queues full
    stdin = b"\n".join(lines[:-1]) + b"\r\n" + lines[-1]  # a CRLF line, no final newline
    r = produce(bs, "piped", stdin, "--timeout", "5",  # linger 5 ms: a full queue drains
                "--producer-property", "queue.buffering.max.messages=50")
    assert (r.returncode, r.stderr) == (0, b"")
    assert read_back(bs, "piped") == [(None, v) for v in lines]


def test_keys_are_parsed_and_a_refused_record_is_reported(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    stdin = b"a:1\nb:" + b"x" * 5000 + b"\nc:3\n"
    r = produce(bs, "keyed", stdin, "--key-separator", ":", "--partition", "0",
                "--producer-property", "message.max.bytes=2000")  # fmt: skip
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "Error when sending message to topic keyed with key: 1 bytes, value: 5000 bytes" in err
    assert "tidelog produce: 1 records failed" in err
    assert read_back(bs, "keyed") == [(b"a", b"1"), (b"c", b"3")]
