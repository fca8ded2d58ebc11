"""SIGKILL (or SIGTERM) the broker process during idempotent produce load: after a restart on
the same port and log dir, no acknowledged record is lost, nothing is duplicated, and the
producer carries on without being recreated."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from serve_process import ServeProcess

N = 6000
KILL_AFTER = 1500
PAUSE_AT = 2 * KILL_AFTER


def _consume_all(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    import confluent_kafka as ck

    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False}
    )
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    out: list[bytes] = []
    try:
        while len(out) < expect:
            msgs = c.consume(1000, 5)
            if not msgs:
                break
            out.extend(m.value() for m in msgs if m.error() is None)
    finally:
        c.close()
    return out


@pytest.mark.parametrize(
    ("client", "how"),
    [("confluent", "SIGKILL"), ("kafka-python", "SIGKILL"), ("confluent", "SIGTERM")],
)
def test_broker_dies_during_idempotent_produce(tmp_path: Path, client: str, how: str) -> None:
    broker = ServeProcess(tmp_path / "logs").start()
    port = broker.port
    bootstrap = broker.bootstrap_servers
    topic = "kill-test"
    acked: set[int] = set()
    failed: list[object] = []
    lock = threading.Lock()
    reached = threading.Event()

    def on_ack(i: int, err: object) -> None:
        with lock:
            if err is None:
                acked.add(i)
            else:
                failed.append(err)
            if len(acked) >= KILL_AFTER:
                reached.set()

    done = threading.Event()
    # the producers hold at PAUSE_AT until the acks before the signal are taken, so that on
    # any machine the signal lands with records still to send (and some in flight)
    snapshotted = threading.Event()

    def produce_confluent() -> None:
        import confluent_kafka as ck

        p = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        for i in range(N):
            while i == PAUSE_AT and not snapshotted.is_set():
                p.poll(0.05)  # serves the delivery reports the snapshot waits for
            while True:
                try:
                    p.produce(
                        topic,
                        str(i).encode(),
                        partition=0,
                        on_delivery=lambda err, msg, i=i: on_ack(i, err),
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(120) == 0
        done.set()

    def produce_kafka_python() -> None:
        import kafka

        p = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            linger_ms=5,
            retries=1000,
            reconnect_backoff_max_ms=200,
            delivery_timeout_ms=120000,
            request_timeout_ms=5000,
        )
        for i in range(N):
            if i == PAUSE_AT:
                assert snapshotted.wait(120)
            fut = p.send(topic, str(i).encode(), partition=0)
            fut.add_callback(lambda _md, i=i: on_ack(i, None))
            fut.add_errback(lambda exc, i=i: on_ack(i, exc))
        p.flush(120)
        p.close(10)
        done.set()

    # topic exists before load starts
    from tidelog.client.kafka_client import KafkaClient

    with KafkaClient(bootstrap) as kc:
        kc.create_topics({topic: 1})
    target = produce_confluent if client == "confluent" else produce_kafka_python
    t = threading.Thread(target=target, daemon=True)
    t.start()
    assert reached.wait(60), f"only {len(acked)} acked before the kill"
    with lock:
        acked_before_kill = set(acked)
    snapshotted.set()
    if how == "SIGKILL":
        broker.kill()
    else:  # clean shutdown under load: exits 0, writes snapshots and the clean marker
        assert broker.stop() == 0
    assert len(acked_before_kill) < N  # the signal landed in the middle of the load
    broker2 = ServeProcess(tmp_path / "logs").start(port=port)
    try:
        t.join(150)
        assert done.is_set(), f"producer did not finish: {len(acked)} acked, errors {failed[:3]}"
        assert not failed, failed[:5]
        values = _consume_all(broker2.bootstrap_servers, topic, N)
        ints = [int(v) for v in values]
        assert len(ints) == len(set(ints)), "duplicates after restart"
        assert acked_before_kill <= set(ints), "acknowledged records lost"
        assert set(ints) == set(range(N)) == acked
        # per-producer order is kept too (max.in.flight <= 5 with idempotence)
        assert ints == sorted(ints)
    finally:
        assert broker2.stop() == 0
