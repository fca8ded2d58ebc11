"""A handler that fails answers UNKNOWN_SERVER_ERROR, as Kafka does: in the top-level error
code where the response has one, else in every per-item error code (items mirroring the
request), and the connection keeps serving.

A handler bug can't be caused for real, so the failing handler is injected into the registry.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import (
    Wire,
    decode_response,
    error_codes,
    produce_body,
    recv_frame,
    request_frame,
)

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.testing.embedded import EmbeddedBroker

HEARTBEAT, METADATA, API_VERSIONS = 12, 3, 18


async def _boom(ctx: object, request: object) -> object:
    raise RuntimeError("injected handler bug")


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        registry = b.broker.registry
        for key in (HEARTBEAT, METADATA):
            spec = registry._specs[key]
            registry._specs[key] = dataclasses.replace(spec, handle=_boom, handle_now=None)
        yield b


def test_top_level_error_code_answers_and_connection_survives(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        resp = w.call(
            HEARTBEAT, 3, group_id="g", generation_id=1, member_id="m", group_instance_id=None
        )
        assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
        again = w.call(18, 3, client_software_name="t", client_software_version="1")
        assert again.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def _sample(cls: type, name: str = "t") -> Any:
    """A request of ``cls`` with one item in every list: one topic "t", partition 0, ..."""
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        if typing.get_origin(tp) is tuple:
            item = typing.get_args(tp)[0]
            if dataclasses.is_dataclass(item):
                kw[f.name] = (_sample(item),)  # type: ignore[arg-type]
            elif issubclass(item, str):
                kw[f.name] = (name,)
            elif issubclass(item, int):
                kw[f.name] = (0,)
        elif isinstance(tp, type) and issubclass(tp, str) and not issubclass(tp, bool):
            kw[f.name] = name
    return make(cls, **kw)


@pytest.fixture
def failing_broker() -> Iterator[EmbeddedBroker]:
    """Every handler but ApiVersions fails."""
    with EmbeddedBroker() as b:
        registry = b.broker.registry
        for spec in list(registry):
            if spec.api_key != API_VERSIONS:
                registry._specs[spec.api_key] = dataclasses.replace(spec, handle=_boom, handle_now=None)
        yield b


def test_every_api_answers_a_failed_handler_per_item(failing_broker: EmbeddedBroker) -> None:
    """Kafka's getErrorResponse: the error in every item mirroring the request, on every API
    and version we advertise, and the connection keeps serving."""
    specs = [s for s in failing_broker.broker.registry if s.api_key != API_VERSIONS]
    with Wire(failing_broker) as w:
        for spec in specs:
            for version in sorted({spec.min_version, spec.max_version}):
                body = _sample(request_class(spec.api_key, version))
                if spec.api_key == 0:  # acks=0 has no response: a failure closes (Kafka's way)
                    body = dataclasses.replace(body, acks=1)
                w.sock.sendall(request_frame(spec.api_key, version, 7, body))
                resp = decode_response(spec.api_key, version, recv_frame(w.sock))
                codes = error_codes(resp)
                where = (spec.api_key, version, resp)
                assert set(codes) <= {ErrorCode.UNKNOWN_SERVER_ERROR}, where
                # DescribeLogDirs v1-2 have no error field for a request's topics (as Kafka's)
                assert codes or (spec.api_key, version) in {(35, 1), (35, 2)}, where
        ok = w.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert ok.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def test_failed_produce_mirrors_partitions_with_invalid_offsets(
    failing_broker: EmbeddedBroker,
) -> None:
    with Wire(failing_broker) as w:
        resp: Any = w.call(0, 9, body=produce_body(9, "orders", {0: b"", 3: b""}))
        (topic,) = resp.responses
        assert topic.name == "orders"
        assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
            (0, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
            (3, ErrorCode.UNKNOWN_SERVER_ERROR, -1),
        ]


def _boom_now(ctx: object, request: object) -> object:
    raise RuntimeError("injected handler bug")


def test_failed_produce_without_coroutine_answers_per_partition() -> None:
    """The Produce answered without a coroutine (its ``handle_now``) fails as its coroutine
    would: UNKNOWN_SERVER_ERROR in every partition, and the connection keeps serving."""
    with EmbeddedBroker() as b:
        spec = b.broker.registry._specs[0]
        b.broker.registry._specs[0] = dataclasses.replace(spec, handle_now=_boom_now)
        with Wire(b) as w:
            resp: Any = w.call(0, 9, body=produce_body(9, "orders", {0: b"", 3: b""}))
            (topic,) = resp.responses
            assert [(p.index, p.error_code) for p in topic.partition_responses] == [
                (0, ErrorCode.UNKNOWN_SERVER_ERROR), (3, ErrorCode.UNKNOWN_SERVER_ERROR)]
            ok = w.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
            assert ok.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def test_real_producer_gets_the_error_per_partition() -> None:
    """librdkafka through confluent-kafka: a failing Produce handler reaches the delivery
    report as Kafka's UNKNOWN error, not as a dropped connection and a retry loop."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("fails", 2, 1)])["fails"].result(30)
        spec = b.broker.registry._specs[0]
        b.broker.registry._specs[0] = dataclasses.replace(spec, handle=_boom, handle_now=None)
        errors: list[Any] = []
        p = confluent_kafka.Producer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "enable.idempotence": False,
                "message.send.max.retries": 0,
            }
        )
        for part in (0, 1):
            p.produce("fails", b"v", partition=part, on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.UNKNOWN] * 2, errors
