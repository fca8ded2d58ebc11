"""Produce and Fetch semantics at the wire level against a real in-process broker."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, fetch_body, produce_body, request_frame

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch, build_batch, iter_batches
from tidelog.testing import EmbeddedBroker

TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"auto.create.topics.enable": "false", "message.max.bytes": "20000"}) as b:
        b.broker.replica_manager.create_topic("t", 2)
        yield b


def _topic(b: EmbeddedBroker, name: str, partitions: int = 1, **configs: str) -> str:
    async def create() -> None:
        b.broker.replica_manager.create_topic(name, partitions, configs)

    b.run(create())
    return name


def _produce(w: Wire, topic: str, parts: dict[int, bytes], acks: int = 1, version: int = 9) -> Any:
    resp: Any = w.call(0, version, body=produce_body(version, topic, parts, acks))
    return {p.index: p for t in resp.responses for p in t.partition_responses}


def _fetch(w: Wire, topic: str, offsets: dict[int, int], version: int = 12, **kw: Any) -> Any:
    resp: Any = w.call(1, version, body=fetch_body(version, topic, offsets, **kw))
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


def _batch(n: int = 3, start: int = 0, **kw: Any) -> bytes:
    return build_batch(
        [(TS + i, f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + n)], **kw
    )


def test_produce_assigns_offsets_and_fetch_returns_same_batches(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "basic")
    with Wire(broker) as w:
        r1 = _produce(w, topic, {0: _batch(3)})[0]
        r2 = _produce(w, topic, {0: _batch(2, 3)})[0]
        assert (r1.error_code, r1.base_offset, r1.log_start_offset) == (0, 0, 0)
        assert (r2.error_code, r2.base_offset) == (0, 3)
        p = _fetch(w, topic, {0: 0})[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
        0,
        5,
        5,
        0,
    )
    batches = list(iter_batches(p.records, 0, len(p.records)))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 4)]
    values = [r.value for b in batches for r in b.iter_records()]
    assert values == [b"v0", b"v1", b"v2", b"v3", b"v4"]


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 10])
def test_produce_every_advertised_version(broker: EmbeddedBroker, version: int) -> None:
    topic = _topic(broker, f"pv{version}")
    with Wire(broker) as w:
        r = _produce(w, topic, {0: _batch(1)}, version=version)[0]
    assert (r.error_code, r.base_offset) == (0, 0)


def test_invalid_required_acks(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        r = _produce(w, "t", {0: _batch()}, acks=2)[0]
    assert r.error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_unknown_topic_and_partition(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        assert (
            _produce(w, "nope", {0: _batch()})[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        assert _produce(w, "t", {7: _batch()})[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _fetch(w, "nope", {0: 0})[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_corrupt_batch_is_rejected_and_nothing_is_appended(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "corrupt")
    bad = bytearray(_batch())
    bad[-1] ^= 0xFF  # payload bit flip: CRC mismatch
    with Wire(broker) as w:
        r = _produce(w, topic, {0: bytes(bad)})[0]
        assert r.error_code == ErrorCode.CORRUPT_MESSAGE
        assert _fetch(w, topic, {0: 0})[0].high_watermark == 0


def test_batch_over_message_max_bytes(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "big")
    big = build_batch([(TS, None, b"x" * 30000)])
    with Wire(broker) as w:
        r = _produce(w, topic, {0: big})[0]
    assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_acks_zero_gets_no_response_and_order_is_kept(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "acks0")
    with Wire(broker) as w:
        w.send(0, 9, body=produce_body(9, topic, {0: _batch(2)}, acks=0))
        corr = w.send(1, 12, body=fetch_body(12, topic, {0: 0}))
        frame_corr, resp = _recv_with_corr(w, 1, 12)
    assert frame_corr == corr  # the first frame back answers the fetch, not the produce
    p = resp.responses[0].partitions[0]
    assert p.high_watermark == 2


def _recv_with_corr(w: Wire, key: int, version: int) -> tuple[int, Any]:
    import struct

    from broker_wire import decode_response, recv_frame

    frame = recv_frame(w.sock)
    return struct.unpack_from(">i", frame)[0], decode_response(key, version, frame)


def test_idempotent_duplicate_gap_and_stale_epoch(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "idem")
    with Wire(broker) as w:
        init: Any = w.call(
            22,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        b0 = _batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)
        b1 = _batch(2, 3, producer_id=pid, producer_epoch=epoch, base_sequence=3)
        assert _produce(w, topic, {0: b0}, acks=-1)[0].base_offset == 0
        assert _produce(w, topic, {0: b1}, acks=-1)[0].base_offset == 3
        dup = _produce(w, topic, {0: b0}, acks=-1)[0]  # a retry of the first batch
        assert (dup.error_code, dup.base_offset) == (0, 0)
        gap = _batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=9)
        assert (
            _produce(w, topic, {0: gap}, acks=-1)[0].error_code
            == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
        again: Any = w.call(
            22,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=pid,
            producer_epoch=epoch,
        )
        # without a transactional id Kafka hands out a new producer id, epoch 0
        assert again.producer_id != pid and again.producer_epoch == 0
        # a higher epoch must start at sequence 0; then the old epoch is fenced
        fresh = _batch(1, producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
        assert _produce(w, topic, {0: fresh}, acks=-1)[0].base_offset == 5
        stale = _batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=5)
        assert (
            _produce(w, topic, {0: stale}, acks=-1)[0].error_code
            == ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert _fetch(w, topic, {0: 0})[0].high_watermark == 6


def test_init_producer_id_gives_distinct_ids(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        ids = {
            w.call(22, v, transactional_id=None, transaction_timeout=1000).producer_id  # type: ignore[attr-defined]
            for v in (0, 1, 2, 3, 4)
        }
    assert len(ids) == 5 and min(ids) >= 0


def test_fetch_offset_out_of_range(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "oor")
    with Wire(broker) as w:
        _produce(w, topic, {0: _batch(2)})
        p = _fetch(w, topic, {0: 50})[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert p.high_watermark == 2


def test_fetch_returns_first_batch_even_when_larger_than_limits(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "limits")
    with Wire(broker) as w:
        _produce(w, topic, {0: build_batch([(TS, None, b"a" * 3000)])})
        _produce(w, topic, {0: build_batch([(TS, None, b"b" * 3000)])})
        one = _fetch(w, topic, {0: 0}, partition_max_bytes=100)[0]
        both = _fetch(w, topic, {0: 0}, partition_max_bytes=1 << 20)[0]
        capped = _fetch(w, topic, {0: 0}, max_bytes=100, partition_max_bytes=1 << 20)[0]
    assert [b.base_offset for b in iter_batches(one.records, 0, len(one.records))] == [0]
    assert [b.base_offset for b in iter_batches(both.records, 0, len(both.records))] == [0, 1]
    assert [b.base_offset for b in iter_batches(capped.records, 0, len(capped.records))] == [0]


def test_fetch_versions_4_to_12(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "fv")
    with Wire(broker) as w:
        _produce(w, topic, {0: _batch(2)})
        for v in range(4, 13):
            p = _fetch(w, topic, {0: 0}, version=v)[0]
            assert p.high_watermark == 2, v
            assert RecordBatch(p.records, 0).last_offset == 1, v


def test_long_poll_is_woken_by_an_append(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "lp")
    with Wire(broker) as fetcher, Wire(broker) as producer:
        fetcher.sock.settimeout(20)
        fetcher.send(1, 12, body=fetch_body(12, topic, {0: 0}, max_wait=30000, min_bytes=1))
        # the fetch is parked: nothing is readable yet
        fetcher.sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            fetcher.sock.recv(1)
        fetcher.sock.setblocking(True)
        fetcher.sock.settimeout(20)
        _produce(producer, topic, {0: _batch(1)})
        resp: Any = fetcher.recv(1, 12)  # long before max_wait (30 s) and the socket timeout
    p = resp.responses[0].partitions[0]
    assert p.high_watermark == 1 and RecordBatch(p.records, 0).base_offset == 0
    assert len(broker.broker.purgatory) == 0


def test_long_poll_times_out_empty(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "lp-empty")
    with Wire(broker) as w:
        p = _fetch(w, topic, {0: 0}, max_wait=50, min_bytes=1)[0]
    assert (p.error_code, p.high_watermark, bytes(p.records or b"")) == (0, 0, b"")


def test_concurrent_fetches_on_many_connections(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "fanout")
    results: list[int] = []

    def fetch() -> None:
        with Wire(broker) as w:
            w.sock.settimeout(20)
            results.append(_fetch(w, topic, {0: 0}, max_wait=20000, min_bytes=1)[0].high_watermark)

    threads = [threading.Thread(target=fetch) for _ in range(5)]
    for t in threads:
        t.start()
    with Wire(broker) as w:
        # wait until all five are parked, by asking the broker (no sleeps)
        while len(broker.broker.purgatory) < 5:
            os.sched_yield()  # let the client threads and the broker thread run
        _produce(w, topic, {0: _batch(1)})
    for t in threads:
        t.join(20)
    assert results == [1] * 5


def test_large_fetch_is_sent_from_the_file_intact(broker: EmbeddedBroker) -> None:
    """Slices over SENDFILE_MIN_BYTES go out with os.sendfile (or pread when the socket
    buffer is busy); the bytes must equal what a small-limit fetch returns piecewise."""
    topic = _topic(broker, "bigfetch", **{"max.message.bytes": "1000000"})
    payloads = [os.urandom(150_000) for _ in range(8)]
    with Wire(broker) as w:
        for i, data in enumerate(payloads):
            assert _produce(w, topic, {0: build_batch([(TS + i, None, data)])})[0].error_code == 0
        p = _fetch(w, topic, {0: 0}, partition_max_bytes=10 << 20)[0]
        one_by_one = [
            _fetch(w, topic, {0: i}, partition_max_bytes=1)[0].records for i in range(len(payloads))
        ]
    assert bytes(p.records) == b"".join(bytes(r) for r in one_by_one)
    values = [r.value for b in iter_batches(p.records, 0, len(p.records)) for r in b.iter_records()]
    assert values == payloads


def test_a_fetch_larger_than_the_socket_buffer_is_sent_without_a_copy(
        broker: EmbeddedBroker) -> None:
    """A consumer's 10 MiB fetch meets a loopback send buffer of ~4 MiB: the rest goes by
    sendfile as the socket drains (the connection's writer counts no copied byte), in
    order, and the answer is the one small fetches give piecewise."""
    topic = _topic(broker, "hugefetch", **{"max.message.bytes": "2000000"})
    payloads = [os.urandom(900_000) for _ in range(12)]
    with Wire(broker) as w:
        for i, data in enumerate(payloads):
            assert _produce(w, topic, {0: build_batch([(TS + i, None, data)])})[0].error_code == 0
        p = _fetch(w, topic, {0: 0}, partition_max_bytes=16 << 20)[0]
        writers = [c.writer for c in broker.broker.connections if c.writer is not None]
        one_by_one = [
            _fetch(w, topic, {0: i}, partition_max_bytes=1)[0].records for i in range(len(payloads))
        ]
    assert bytes(p.records) == b"".join(bytes(r) for r in one_by_one)
    assert len(p.records) > 10 << 20
    assert sum(wr.zero_copy_bytes for wr in writers) >= len(p.records)
    assert sum(wr.copied_bytes for wr in writers) == 0


def test_a_produce_answer_waits_behind_a_fetch_the_socket_has_not_taken(
        broker: EmbeddedBroker) -> None:
    """A fetch's file chunk waits for the socket (the client reads nothing yet) when a
    Produce read with it is answered alone (after its ``flush.messages`` fsync): that one
    pre-encoded answer, which the connection's flush writes to the transport itself when
    nothing waits, goes out after the fetch's bytes, not ahead of them."""
    topic = _topic(broker, "behindfetch", **{"max.message.bytes": "2000000",
                                            "flush.messages": "1"})
    payloads = [os.urandom(900_000) for _ in range(12)]
    with Wire(broker) as w:
        w.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # (no autotuning)
        for i, data in enumerate(payloads):
            assert _produce(w, topic, {0: build_batch([(TS + i, None, data)])})[0].error_code == 0
        fetch_corr, produce_corr = w.corr + 1, w.corr + 2
        w.corr += 2
        w.sock.sendall(  # one read: the fetch answered first, the produce after its fsync
            request_frame(1, 12, fetch_corr, fetch_body(12, topic, {0: 0},
                                                        partition_max_bytes=16 << 20))
            + request_frame(0, 9, produce_corr, produce_body(9, topic, {0: _batch(1)}, 1)))
        first_corr, fetched = _recv_with_corr(w, 1, 12)
        second_corr, produced = _recv_with_corr(w, 0, 9)
    assert (first_corr, second_corr) == (fetch_corr, produce_corr)
    assert len(fetched.responses[0].partitions[0].records) > 10 << 20  # type: ignore[attr-defined]
    p = produced.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    assert (p.error_code, p.base_offset) == (0, len(payloads))


def test_invalid_record_lists_the_offending_records(broker: EmbeddedBroker) -> None:
    """A compacted topic rejects records without a key: INVALID_RECORD + record_errors (v8+)."""
    topic = _topic(broker, "compacted", **{"cleanup.policy": "compact"})
    batch = build_batch([(TS, b"k0", b"v"), (TS, None, b"no key"), (TS, b"k2", b"v")])
    with Wire(broker) as w:
        r = _produce(w, topic, {0: batch}, version=9)[0]
        assert r.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in r.record_errors] == [1]
        assert r.error_message
        assert _fetch(w, topic, {0: 0})[0].high_watermark == 0


def test_invalid_timestamp(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "ts", **{"message.timestamp.after.max.ms": "1000"})
    future = build_batch([(TS * 2, None, b"from the future")])
    with Wire(broker) as w:
        r = _produce(w, topic, {0: future}, version=10)[0]
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP


def test_log_append_time_is_returned(broker: EmbeddedBroker) -> None:
    import time

    topic = _topic(broker, "lat", **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Wire(broker) as w:
        r = _produce(w, topic, {0: _batch(2)}, version=9)[0]
        p = _fetch(w, topic, {0: 0})[0]
    after = int(time.time() * 1000)
    from tidelog.protocol.kio_util import ms

    lat = ms(r.log_append_time)
    assert before <= lat <= after
    assert RecordBatch(p.records, 0).max_timestamp == lat


def test_list_offsets_every_spec(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "lo")
    with Wire(broker) as w:
        _produce(w, topic, {0: build_batch([(TS + 10, None, b"a"), (TS + 30, None, b"b")])})
        _produce(w, topic, {0: build_batch([(TS + 20, None, b"c")])})

        def lookup(ts: int, version: int = 7) -> tuple[int, int]:
            from broker_wire import request_class

            from tidelog.protocol.kio_util import make, nested

            cls = request_class(2, version)
            tcls = nested(cls, "topics")
            pcls = nested(tcls, "partitions")
            resp: Any = w.call(
                2,
                version,
                body=make(
                    cls,
                    replica_id=-1,
                    isolation_level=0,
                    topics=(
                        make(
                            tcls,
                            name=topic,
                            partitions=(
                                make(
                                    pcls, partition_index=0, timestamp=ts, current_leader_epoch=-1
                                ),
                            ),
                        ),
                    ),
                ),
            )
            p = resp.topics[0].partitions[0]
            assert p.error_code == 0
            return p.offset, p.timestamp

        assert lookup(-2)[0] == 0
        assert lookup(-1)[0] == 3
        assert lookup(-3) == (1, TS + 30)  # max timestamp (v7)
        assert lookup(TS + 15)[0] == 1
        assert lookup(TS + 25)[0] == 1
        assert lookup(TS + 31)[0] == -1
        assert lookup(TS + 15, version=1)[0] == 1


def test_acks_all_below_min_insync_replicas(broker: EmbeddedBroker) -> None:
    topic = _topic(broker, "minisr", **{"min.insync.replicas": "2"})
    with Wire(broker) as w:
        assert (
            _produce(w, topic, {0: _batch()}, acks=-1)[0].error_code
            == ErrorCode.NOT_ENOUGH_REPLICAS
        )
        assert _produce(w, topic, {0: _batch()}, acks=1)[0].error_code == 0


def test_failed_acks_zero_produce_closes_the_connection(broker: EmbeddedBroker) -> None:
    """Kafka closes the connection when an acks=0 produce fails: the only signal the client gets."""
    topic = _topic(broker, "acks0-fail")
    with Wire(broker) as w:
        w.send(0, 9, body=produce_body(9, topic, {0: _batch()}, acks=0))  # fine: stays open
        w.send(0, 9, body=produce_body(9, "no-such-topic", {0: _batch()}, acks=0))
        w.sock.settimeout(10)
        assert w.sock.recv(1) == b""
    with Wire(broker) as w:
        assert _fetch(w, topic, {0: 0})[0].high_watermark == 3


def test_describe_producers(broker: EmbeddedBroker) -> None:
    import time

    topic = _topic(broker, "descprod")
    now = int(time.time() * 1000)
    with Wire(broker) as w:
        init: Any = w.call(
            22,
            4,
            transactional_id=None,
            transaction_timeout=1000,
            producer_id=-1,
            producer_epoch=-1,
        )
        batch = build_batch(
            [(now, None, b"a"), (now + 1, None, b"b")],
            producer_id=init.producer_id,
            producer_epoch=0,
            base_sequence=0,
        )
        _produce(w, topic, {0: batch}, acks=-1)
        _produce(w, topic, {0: _batch()})  # no producer id: not tracked
        resp: Any = w.call(61, 0, topics=(make_topic_request(topic, [0, 5]),))
    p0, p5 = resp.topics[0].partitions
    assert p0.error_code == 0
    assert [
        (s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp)
        for s in p0.active_producers
    ] == [(init.producer_id, 0, 1, now + 1)]
    assert p5.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def make_topic_request(topic: str, partitions: list[int]) -> Any:
    from broker_wire import request_class

    from tidelog.protocol.kio_util import make, nested

    return make(
        nested(request_class(61, 0), "topics"), name=topic, partition_indexes=tuple(partitions)
    )


def test_a_parked_fetch_of_many_partitions_answers_the_one_that_moved(
    broker: EmbeddedBroker,
) -> None:
    """Woken by one partition, a parked fetch reads that one again: its record is answered
    at once, the others as they stood (nothing, their high watermark unchanged)."""
    topic = _topic(broker, "lp-many", partitions=20)
    with Wire(broker) as producer:
        for p in range(20):
            _produce(producer, topic, {p: _batch(1)})  # every partition at offset 1
        got: list[Any] = []

        def fetch() -> None:
            with Wire(broker) as w:
                w.sock.settimeout(20)
                got.append(_fetch(w, topic, dict.fromkeys(range(20), 1), max_wait=20000,
                                  min_bytes=1))

        parked = len(broker.broker.purgatory)
        t = threading.Thread(target=fetch)
        t.start()
        while len(broker.broker.purgatory) < parked + 20:  # parked on all 20, asked, no sleeps
            os.sched_yield()
        _produce(producer, topic, {13: _batch(1)})
        t.join(20)
    (parts,) = got
    assert set(parts) == set(range(20))
    assert RecordBatch(parts[13].records, 0).base_offset == 1 and parts[13].high_watermark == 2
    for p in set(range(20)) - {13}:
        assert (parts[p].error_code, parts[p].high_watermark, bytes(parts[p].records or b"")) \
            == (0, 1, b"")
