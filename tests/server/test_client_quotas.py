"""Client quotas: AlterClientQuotas / DescribeClientQuotas at the wire (stored, persisted
across a restart), Kafka's quota resolution order and throttle formula, and, on a broker
whose clock the test moves, a producer and a consumer over their byte rates getting exactly
Kafka's throttle while another client gets none (what the broker decided, not rates measured
on a wall clock; bench/quotas.py measures how close real clients keep to a quota)."""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire, decode_response, fetch_body, produce_body, recv_frame, request_class
from kio.serial import entity_writer

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import RecordBatchBuilder
from tidelog.server.faults import FaultPlan, ShiftedClock
from tidelog.server.quota import ClientQuotaManager, ClientQuotaStore, QuotaType
from tidelog.server.quota.store import entity
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import ManualClock

Entity = dict[str, str | None]


def alter(w: Wire, changes: list[tuple[Entity, dict[str, float | None]]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:
    cls = request_class(49, 1)
    ecls = nested(cls, "entries")
    dcls = nested(ecls, "entity")
    ocls = nested(ecls, "ops")
    body = make(cls, validate_only=validate_only, entries=tuple(make(
        ecls, entity=tuple(make(dcls, entity_type=t, entity_name=n) for t, n in ent.items()),
        ops=tuple(make(ocls, key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()))
        for ent, ops in changes))
    resp: Any = w.call(49, 1, body=body)
    return [(e.error_code, e.error_message) for e in resp.entries]


def describe(w: Wire, components: list[tuple[str, int, str | None]],
             strict: bool = False) -> Any:
    cls = request_class(48, 1)
    ccls = nested(cls, "components")
    return w.call(48, 1, body=make(cls, strict=strict, components=tuple(
        make(ccls, entity_type=t, match_type=m, match=n) for t, m, n in components)))


def entries(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {tuple((e.entity_type, e.entity_name) for e in x.entity):
            {v.key: v.value for v in x.values} for x in resp.entries}


def test_alter_and_describe_quotas_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        with Wire(b) as w:
            assert alter(w, [
                ({"user": "alice"}, {"producer_byte_rate": 1024.0}),
                ({"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 2048.0}),
                ({"client-id": None}, {"producer_byte_rate": 4096.0}),
            ]) == [(0, None)] * 3
            # validate_only stores nothing; bad keys and values are INVALID_REQUEST
            assert alter(w, [({"user": "bob"}, {"producer_byte_rate": 1.0})],
                         validate_only=True) == [(0, None)]
            bad = alter(w, [({"user": "x"}, {"no_such_quota": 1.0}),
                            ({"user": "x"}, {"producer_byte_rate": 1.5}),
                            ({"user": "x", "ip": "1.2.3.4"}, {"producer_byte_rate": 1.0})])
            assert [c for c, _ in bad] == [ErrorCode.INVALID_REQUEST] * 3
        b.restart()
        with Wire(b) as w:
            every = entries(describe(w, []))
            assert every == {
                (("user", "alice"),): {"producer_byte_rate": 1024.0},
                (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 2048.0},
                (("client-id", None),): {"producer_byte_rate": 4096.0},
            }
            alice = entries(describe(w, [("user", 0, "alice")], strict=True))
            assert list(alice) == [(("user", "alice"),)]
            defaults = entries(describe(w, [("client-id", 1, None)]))
            assert list(defaults) == [(("client-id", None),)]
            named = entries(describe(w, [("client-id", 2, None)]))
            assert list(named) == [(("client-id", "app"), ("user", "alice"))]
            assert alter(w, [({"user": "alice"}, {"producer_byte_rate": None})]) == [(0, None)]
            assert (("user", "alice"),) not in entries(describe(w, []))
            dup: Any = describe(w, [("user", 0, "a"), ("user", 0, "b")])
            assert dup.error_code == ErrorCode.INVALID_REQUEST


def test_resolution_order_and_throttle_formula(tmp_path: Path) -> None:
    store = ClientQuotaStore(tmp_path)
    store.alter([
        (entity([("client-id", None)]), {"producer_byte_rate": 100.0}),
        (entity([("user", "alice")]), {"producer_byte_rate": 1000.0}),
        (entity([("user", "alice"), ("client-id", "app")]), {"producer_byte_rate": 10.0}),
    ])
    mgr = ClientQuotaManager(store, window_num=11, window_size_ms=1000)
    assert mgr.quota(QuotaType.PRODUCE, "alice", "app") == (10.0, ("alice", "app"))
    assert mgr.quota(QuotaType.PRODUCE, "alice", "other") == (1000.0, ("alice", ""))
    assert mgr.quota(QuotaType.PRODUCE, "bob", "x") == (100.0, ("", "x"))
    assert mgr.quota(QuotaType.FETCH, "bob", "x")[0] == float("inf")
    # 10 s minimum window: 1000 B at rate 100 B/s is exactly on quota, 2000 B is 100 over:
    # throttle = (200 - 100) / 100 * 10 s = 10 s
    assert mgr.record(QuotaType.PRODUCE, "bob", "x", 1000, now_ms=0) == 0
    assert mgr.record(QuotaType.PRODUCE, "bob", "x", 1000, now_ms=0) == 10_000
    assert mgr.record(QuotaType.PRODUCE, "bob", "y", 1000, now_ms=0) == 0  # its own rate


# -- the broker's decisions on a frozen clock ----------------------------------------------
# Kafka's defaults: 11 samples of 1 s, so a rate is taken over at least 10 s (10 full samples).
QUOTA = 1000.0  # bytes per second
MIN_WINDOW_MS = 10_000


def _expected_throttle(recorded: int) -> int:
    """Kafka's throttle for ``recorded`` bytes inside one (frozen) window: the time after
    which the rate over the window is back at the quota, (rate - quota) / quota * window."""
    rate = recorded / (MIN_WINDOW_MS / 1000)
    return max(0, int((rate - QUOTA) / QUOTA * MIN_WINDOW_MS))


class _Conn:
    """A raw connection sending requests under its own client id."""

    def __init__(self, b: EmbeddedBroker, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", b.port), timeout=30)
        self.client_id = client_id
        self.corr = 0

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.corr += 1
        cls = request_class(api_key, version)
        hdr = cls.__header_schema__
        buf = io.BytesIO()
        entity_writer(hdr)(buf, hdr(request_api_key=api_key, request_api_version=version,
                                    correlation_id=self.corr, client_id=self.client_id))
        entity_writer(cls)(buf, body)
        self.sock.sendall(struct.pack(">i", buf.tell()) + buf.getvalue())
        return decode_response(api_key, version, recv_frame(self.sock))

    def produce(self, topic: str, batch: bytes) -> int:
        """throttle_time_ms of a Produce of ``batch`` (acks=1) to partition 0."""
        resp = self.call(0, 8, produce_body(8, topic, {0: batch}))
        assert [p.error_code for t in resp.responses for p in t.partition_responses] == [0]
        return int(resp.throttle_time.total_seconds() * 1000)

    def fetch(self, topic: str, offset: int, max_bytes: int) -> tuple[int, bytes]:
        """(throttle_time_ms, records) of a Fetch at ``offset`` of partition 0."""
        resp = self.call(1, 11, fetch_body(11, topic, {0: offset}, partition_max_bytes=max_bytes))
        records = [p.records or b"" for t in resp.responses for p in t.partitions]
        return int(resp.throttle_time.total_seconds() * 1000), b"".join(records)

    def close(self) -> None:
        self.sock.close()


def _batch(size: int) -> bytes:
    """A producer's record batch of close to ``size`` bytes (one record, a value of the
    rest), stamped at the frozen clock's time."""
    b = RecordBatchBuilder()
    b.append(ManualClock().milliseconds(), b"k", b"v" * (size - 80))
    return b.build()


@pytest.fixture
def frozen() -> Iterator[tuple[EmbeddedBroker, ShiftedClock]]:
    """A broker whose clock moves only when the test advances it (the quota windows with it)."""
    plan = FaultPlan(clock=ManualClock())
    with EmbeddedBroker(fault_plan=plan) as b:
        with Wire(b) as w:
            assert alter(w, [({"client-id": "slow"}, {"producer_byte_rate": QUOTA,
                                                      "consumer_byte_rate": QUOTA})]) == \
                [(0, None)]
        yield b, plan.clock


def test_producer_over_its_quota_gets_kafkas_throttle(
        frozen: tuple[EmbeddedBroker, ShiftedClock]) -> None:
    """The bytes of each Produce go against its client's rate on the broker's clock: within
    the window's quota no throttle, past it exactly Kafka's throttle; another client is never
    throttled; once the window has passed, the slow client starts afresh."""
    b, clock = frozen
    first, second = _batch(6000), _batch(4300)
    assert len(first) + len(second) > QUOTA * MIN_WINDOW_MS / 1000  # over, by a little
    slow, free = _Conn(b, "slow"), _Conn(b, "free")
    try:
        assert slow.produce("quota-p", first) == _expected_throttle(len(first)) == 0
        throttle = slow.produce("quota-p", second)
        assert throttle == _expected_throttle(len(first) + len(second)) > 0
        assert [free.produce("quota-p", x) for x in (first, second, first)] == [0, 0, 0]
        clock.advance(11 * 1000)  # every sample of the window has expired
        assert slow.produce("quota-p", second) == 0
    finally:
        slow.close()
        free.close()


def test_consumer_over_its_quota_is_answered_empty_with_kafkas_throttle(
        frozen: tuple[EmbeddedBroker, ShiftedClock]) -> None:
    """A Fetch whose bytes take the client past its consumer_byte_rate is answered empty with
    Kafka's throttle and its bytes are taken back (so it counts for nothing); another client
    reads the same bytes unthrottled; after the window the slow client reads them."""
    b, clock = frozen
    producer, slow, free = _Conn(b, "producer"), _Conn(b, "slow"), _Conn(b, "free")
    try:
        assert [producer.produce("quota-c", _batch(n)) for n in (6000, 4300)] == [0, 0]
        throttle, stored = free.fetch("quota-c", 0, 1 << 20)
        assert throttle == 0
        size = 12 + int.from_bytes(stored[8:12], "big")  # the first batch, as the log holds it
        first, second = stored[:size], stored[size:]
        assert slow.fetch("quota-c", 0, len(first)) == (_expected_throttle(len(first)), first)
        throttle, records = slow.fetch("quota-c", 1, len(second))
        assert throttle == _expected_throttle(len(first) + len(second)) > 0
        assert records == b""  # answered empty
        # its bytes were taken back: the same fetch again is throttled just as much
        assert slow.fetch("quota-c", 1, len(second)) == (throttle, b"")
        assert free.fetch("quota-c", 0, 1 << 20) == (0, first + second)
        clock.advance(11 * 1000)  # every sample of the window has expired
        assert slow.fetch("quota-c", 1, len(second)) == (0, second)
    finally:
        for c in (producer, slow, free):
            c.close()
