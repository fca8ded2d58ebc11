"""KIP-714 on the broker without sockets: subscriptions matched against clients, the
subscription id, push intervals, the errors Kafka's ClientMetricsManager answers, and OTLP
payloads (built with opentelemetry-proto, compressed with the real codecs) decoded into the
values /metrics shows."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from tidelog.protocol.errors import ErrorCode
from tidelog.records.compression import compress
from tidelog.server.errors import ApiError
from tidelog.server.telemetry.configs import APPEND, DELETE, SET, SUBTRACT
from tidelog.server.telemetry.manager import (
    ACCEPTED_COMPRESSION_TYPES,
    ClientMetricsManager,
    Push,
    subscription_id,
    uuid_hash,
)
from tidelog.util.clock import ManualClock

PRODUCER = {"client_id": "orders-producer", "client_software_name": "confluent-kafka-python",
            "client_software_version": "2.16.1", "client_source_address": "10.0.0.7",
            "client_source_port": "51000"}
CONSUMER = {**PRODUCER, "client_id": "billing-consumer"}
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
CONNECTIONS = "org.apache.kafka.producer.connection.creation.total"


def _manager(tmp_path, **kw: int) -> tuple[ClientMetricsManager, ManualClock]:
    clock = ManualClock()
    m = ClientMetricsManager(clock, **kw)
    m.configs.attach(tmp_path)
    return m, clock


def _subscribe(m: ClientMetricsManager, name: str, metrics: str, interval: int,
               match: str | None = None) -> None:
    ops: list[tuple[str, int, str | None]] = [("metrics", SET, metrics),
                                              ("interval.ms", SET, str(interval))]
    if match is not None:
        ops.append(("match", SET, match))
    m.alter(name, ops, validate_only=False)


def _payload(latency: float, connections: int, *, delta: bool = True) -> bytes:
    temporality = (metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA if delta
                   else metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE)
    data = metrics_pb2.MetricsData()
    sm = data.resource_metrics.add().scope_metrics.add()
    g = sm.metrics.add(name=LATENCY, description="latency")
    g.gauge.data_points.add(as_double=latency, attributes=[
        KeyValue(key="node.id", value=AnyValue(string_value="1"))])
    s = sm.metrics.add(name=CONNECTIONS, description="connections")
    s.sum.is_monotonic = True
    s.sum.aggregation_temporality = temporality
    s.sum.data_points.add(as_int=connections)
    return data.SerializeToString()


def _values(m: ClientMetricsManager, instance: uuid.UUID) -> dict[str, dict[tuple, float]]:
    return {n: dict(f.values) for n, f in m.instances[instance].received.families.items()}


def test_no_subscription_asks_for_nothing(tmp_path) -> None:
    m, _ = _manager(tmp_path)
    a = m.get_subscriptions(None, PRODUCER)
    assert a.error == ErrorCode.NONE
    assert a.client_instance_id.int != 0
    assert a.metrics == ()
    assert a.push_interval_ms == 300000  # Kafka's default interval with no subscription


def test_matching_subscriptions_are_merged(tmp_path) -> None:
    m, _ = _manager(tmp_path)
    _subscribe(m, "producers", "org.apache.kafka.producer.", 2000, "client_id=.*-producer")
    _subscribe(m, "fast", "org.apache.kafka.producer.node.", 500,
               "client_software_name=confluent-kafka-python,client_source_address=10\\.0\\..*")
    _subscribe(m, "consumers", "org.apache.kafka.consumer.", 100, "client_id=billing-.*")
    p = m.get_subscriptions(None, PRODUCER)
    assert p.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.producer.node.")
    assert p.push_interval_ms == 500
    assert p.accepted_compression_types == ACCEPTED_COMPRESSION_TYPES
    c = m.get_subscriptions(None, CONSUMER)
    assert c.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.node.")
    assert c.push_interval_ms == 100
    assert p.subscription_id == subscription_id(frozenset(p.metrics), 500, p.client_instance_id)
    _subscribe(m, "everything", "*", 1000)
    assert m.get_subscriptions(None, PRODUCER).metrics == ("*",)


def test_subscription_id_is_kafkas_crc_xor_uuid_hash() -> None:
    # Kafka's Uuid.hashCode for 00000000-0000-0001-0000-000000000002: (1 ^ 2) folded = 3
    u = uuid.UUID("00000000-0000-0001-0000-000000000002")
    assert uuid_hash(u) == 3
    # CRC32C("[a, b]1000") computed independently of the manager
    from crc32c import crc32c

    crc = crc32c(b"[a, b]1000")
    want = (crc ^ 3) - (1 << 32) if (crc ^ 3) & 0x80000000 else crc ^ 3
    assert subscription_id(frozenset({"b", "a"}), 1000, u) == want


def test_push_interval_throttles_and_first_push_after_get_is_on_time(tmp_path) -> None:
    m, clock = _manager(tmp_path)
    _subscribe(m, "all", "*", 1000)
    a = m.get_subscriptions(None, PRODUCER)
    again = m.get_subscriptions(a.client_instance_id, PRODUCER)
    assert again.error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push = Push(a.client_instance_id, a.subscription_id, False, 0, _payload(1.5, 2))
    assert m.push(push, PRODUCER) == ErrorCode.NONE  # right after the Get: accepted
    clock.advance(400)
    assert m.push(push, PRODUCER) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.advance(600)
    assert m.push(push, PRODUCER) == ErrorCode.NONE
    assert m.throttled == 2


def test_pushes_decode_every_codec_and_deltas_accumulate(tmp_path) -> None:
    m, clock = _manager(tmp_path)
    _subscribe(m, "all", "*", 100)
    a = m.get_subscriptions(None, PRODUCER)
    iid = a.client_instance_id
    for i, codec in enumerate((0, *ACCEPTED_COMPRESSION_TYPES)):
        body = _payload(float(i), 3)
        data = compress(codec, body) if codec else body
        assert m.push(Push(iid, a.subscription_id, False, codec, data), PRODUCER) == ErrorCode.NONE
        clock.advance(100)
    values = _values(m, iid)
    latency = "org_apache_kafka_producer_node_request_latency_avg"
    assert values[latency] == {(("node_id", "1"),): 4.0}  # a gauge: the last push
    counter = "org_apache_kafka_producer_connection_creation_total"
    assert values[counter] == {(): 15.0}  # five delta pushes of 3
    cumulative = _payload(9.0, 40, delta=False)
    assert m.push(Push(iid, a.subscription_id, False, 0, cumulative), PRODUCER) == ErrorCode.NONE
    assert _values(m, iid)[counter] == {(): 40.0}


def test_push_errors_as_kafka_answers(tmp_path) -> None:
    m, clock = _manager(tmp_path, telemetry_max_bytes=64)
    _subscribe(m, "all", "*", 100)
    a = m.get_subscriptions(None, PRODUCER)
    iid, sid = a.client_instance_id, a.subscription_id
    assert m.push(Push(None, sid, False, 0, b""), PRODUCER) == ErrorCode.INVALID_REQUEST
    assert m.push(Push(uuid.UUID(int=0), sid, False, 0, b""), PRODUCER) == ErrorCode.INVALID_REQUEST
    assert m.push(Push(iid, sid + 1, False, 0, b""), PRODUCER) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.advance(100)
    assert m.push(Push(iid, sid, False, 9, b"x"), PRODUCER) == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    clock.advance(1)
    # told its codec is wrong, the client asks again at once and is not throttled, and
    # pushes after that Get before a whole interval
    assert m.get_subscriptions(iid, PRODUCER).error == ErrorCode.NONE
    big = _payload(1.0, 1) * 4
    assert len(big) > 64
    assert m.push(Push(iid, sid, False, 0, big), PRODUCER) == ErrorCode.TELEMETRY_TOO_LARGE
    clock.advance(100)
    assert m.push(Push(iid, sid, False, 4, b"not zstd"), PRODUCER) == ErrorCode.INVALID_RECORD
    clock.advance(100)
    assert m.push(Push(iid, sid, False, 0, b"\xff\xff\xff"), PRODUCER) == ErrorCode.INVALID_RECORD
    # a terminating push is taken before its interval; nothing is taken after it
    assert m.push(Push(iid, sid, True, 0, b""), PRODUCER) == ErrorCode.NONE
    clock.advance(1000)
    assert m.push(Push(iid, sid, False, 0, b""), PRODUCER) == ErrorCode.INVALID_REQUEST


def test_changed_subscription_is_unknown_until_the_client_asks_again(tmp_path) -> None:
    m, clock = _manager(tmp_path)
    _subscribe(m, "all", "org.apache.kafka.producer.", 100)
    a = m.get_subscriptions(None, PRODUCER)
    m.alter("all", [("metrics", APPEND, "org.apache.kafka.consumer.")], validate_only=False)
    clock.advance(100)
    push = Push(a.client_instance_id, a.subscription_id, False, 0, _payload(1.0, 1))
    assert m.push(push, PRODUCER) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    b = m.get_subscriptions(a.client_instance_id, PRODUCER)
    assert b.error == ErrorCode.NONE
    assert b.client_instance_id == a.client_instance_id
    assert b.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert b.subscription_id != a.subscription_id
    fresh = Push(a.client_instance_id, b.subscription_id, False, 0, _payload(1.0, 1))
    assert m.push(fresh, PRODUCER) == ErrorCode.NONE


def test_instances_expire_after_three_intervals_or_a_minute(tmp_path) -> None:
    m, clock = _manager(tmp_path)
    _subscribe(m, "slow", "*", 30000)
    a = m.get_subscriptions(None, PRODUCER)
    clock.advance(89999)
    m.expire()
    assert a.client_instance_id in m.instances
    clock.advance(1)
    m.expire()
    assert a.client_instance_id not in m.instances


def test_an_instance_goes_with_its_connection(tmp_path) -> None:
    m, clock = _manager(tmp_path)
    first, second = object(), object()
    live = [first, second]
    m.live_connections = lambda: live
    a = m.get_subscriptions(None, PRODUCER, first)
    b = m.get_subscriptions(None, CONSUMER, second)
    live.remove(first)  # the producer's connection closed
    clock.advance(1000)
    m.expire()
    assert a.client_instance_id not in m.instances and b.client_instance_id in m.instances
    live.remove(second)
    m.expire()  # swept at most once a second
    assert b.client_instance_id in m.instances
    clock.advance(1000)
    m.expire()
    assert m.instances == {}


def test_the_instance_cache_is_bounded_and_evicts_the_stalest(tmp_path, monkeypatch) -> None:
    import tidelog.server.telemetry.manager as manager_module

    monkeypatch.setattr(manager_module, "CACHE_MAX_SIZE", 3)
    m, clock = _manager(tmp_path)
    ids = []
    for _ in range(3):
        ids.append(m.get_subscriptions(None, PRODUCER).client_instance_id)
        clock.advance(10)
    clock.advance(300000)
    assert m.get_subscriptions(ids[0], PRODUCER).error == ErrorCode.NONE  # ids[0] refreshed
    newest = m.get_subscriptions(None, PRODUCER).client_instance_id
    assert set(m.instances) == {ids[0], ids[2], newest}  # ids[1] was the stalest


def test_configs_validate_persist_and_delete(tmp_path) -> None:
    m, _ = _manager(tmp_path)
    for ops, code in (
        ([("interval.ms", SET, "99")], ErrorCode.INVALID_REQUEST),
        ([("interval.ms", SET, "3600001")], ErrorCode.INVALID_REQUEST),
        ([("match", SET, "client_rack=.*")], ErrorCode.INVALID_CONFIG),
        ([("match", SET, "client_id=(")], ErrorCode.INVALID_CONFIG),
        ([("colour", SET, "blue")], ErrorCode.INVALID_REQUEST),
        ([("interval.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG),
    ):
        with pytest.raises(ApiError) as err:
            m.alter("s", ops, validate_only=False)
        assert err.value.code == code
    _subscribe(m, "s", "a.,b.", 1000, "client_id=x")
    m.alter("s", [("metrics", SUBTRACT, "a."), ("metrics", APPEND, "c.")], validate_only=False)
    m.alter("v", [("metrics", SET, "z.")], validate_only=True)
    again = ClientMetricsManager(ManualClock())
    again.configs.attach(tmp_path)
    assert again.configs.configs == {"s": {"metrics": "b.,c.", "interval.ms": "1000",
                                           "match": "client_id=x"}}
    entries = {e.name: (e.value, e.source) for e in again.configs.entries("s")}
    assert entries == {"metrics": ("b.,c.", 7), "interval.ms": ("1000", 7),
                       "match": ("client_id=x", 7)}
    version = m.subscription_version
    m.alter("s", [("metrics", DELETE, None), ("interval.ms", DELETE, None),
                  ("match", DELETE, None)], validate_only=False)
    assert "s" not in m.configs.configs and m.subscription_version == version + 1


def test_a_subscription_added_while_a_client_is_evaluated_reaches_it_at_its_next_request(
        tmp_path) -> None:
    """In a cluster the subscriptions change on ZooKeeper's thread while the event loop
    evaluates a client: a change landing between the two reads of the evaluation (the
    store replaces its mapping, then moves its version) is evaluated at the next request,
    not stamped as seen with the subscriptions from before it."""
    m, _clock = _manager(tmp_path)
    store = m.configs
    subscriptions = store.subscriptions

    def racing() -> list:
        found = subscriptions()
        store.subscriptions = subscriptions  # type: ignore[method-assign]
        _subscribe(m, "late", "org.apache.kafka.producer.", 1000)  # as the other thread would
        return found

    store.subscriptions = racing  # type: ignore[method-assign]
    first = m.get_subscriptions(None, PRODUCER)
    assert first.error == ErrorCode.NONE and first.metrics == ()
    again = m.get_subscriptions(first.client_instance_id, PRODUCER)
    assert again.error == ErrorCode.NONE
    assert again.metrics == ("org.apache.kafka.producer.",) and again.push_interval_ms == 1000
    assert again.subscription_id != first.subscription_id
