"""Every group API, every advertised version, with arbitrary field values over a real socket:
each request gets a well-formed answer with a Kafka error code, the connection keeps serving,
and no handler fails (a handler failure is logged by the connection and answered with
UNKNOWN_SERVER_ERROR or a closed connection, both of which this test rejects).

Ids come from a small pool so that requests meet existing groups and members; timeouts are
short so that a JoinGroup that waits for a rebalance finishes quickly.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import decode_response, error_codes, recv_frame, request_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.handler_discovery import discover
from tidelog.testing import EmbeddedBroker

REGISTRY = discover()

GROUP_APIS = {
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    42: "DeleteGroups",
    47: "OffsetDelete",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}
IDS = ["", "g", "h", "m", "fuzz-topic", "__consumer_offsets", "x" * 300, "ü"]
INTS = [-1, 0, 1, 2, 3, 5, 100, 2**31 - 1, -(2**31)]
GENERATIONS = [1, 2, 3]
TIMEOUTS_MS = [0, 1, 20, 50]
# Half the strings come from the values a well-behaved client would send, so that examples
# reach joined members, syncs and commits, not only the validation errors.
LIKELY = {
    "group_id": ["g"],
    "key": ["g"],
    "protocol_type": ["consumer"],
    "protocol_name": ["range"],
    "name": ["range", "fuzz-topic"],
}
LEARNED = "@"  # "@k": the k-th member id the broker handed out in this example (if any)
SUBSCRIPTION = bytes.fromhex("0000 00000001 000a 66757a7a2d746f706963 ffffffff")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = {
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1",
        "group.max.session.timeout.ms": "300",
        "offsets.topic.num.partitions": "2",
    }
    with EmbeddedBroker(config) as b:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("fuzz-topic", 2, 1)])["fuzz-topic"].result(30)
        yield b


def _value(field: dataclasses.Field[Any], tp: Any, draw: st.DrawFn, depth: int) -> Any:
    """A value for one kio field, from pools that hit known groups, members and edges."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = next(a for a in typing.get_args(tp) if a is not type(None))
        return None if draw(st.booleans()) else _value(field, inner, draw, depth)
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        n = draw(st.integers(0, 2 if depth < 2 else 0))
        return tuple(_value(field, item, draw, depth + 1) for _ in range(n))
    kafka_type = field.metadata.get("kafka_type", "")
    if kafka_type.startswith("timedelta"):
        return draw(st.one_of(st.just(50), st.sampled_from(TIMEOUTS_MS)))
    if dataclasses.is_dataclass(tp):
        return _entity(tp, draw, depth + 1)
    if isinstance(tp, type) and issubclass(tp, bool):
        return draw(st.booleans())
    if isinstance(tp, type) and issubclass(tp, int):
        if kafka_type in ("int8",):
            return draw(st.sampled_from([-1, 0, 1, 2, 127]))
        if kafka_type in ("int16",):
            return draw(st.sampled_from([-1, 0, 1, 5, 32767]))
        if field.name == "generation_id":
            return draw(st.one_of(st.sampled_from(GENERATIONS), st.sampled_from(INTS)))
        return draw(st.sampled_from(INTS))
    if isinstance(tp, type) and issubclass(tp, str):
        if field.name == "member_id":
            likely: st.SearchStrategy[str] = st.integers(0, 3).map(lambda k: f"{LEARNED}{k}")
        else:
            likely = st.sampled_from(LIKELY.get(field.name, IDS))
        return draw(st.one_of(likely, st.sampled_from(IDS)))
    if isinstance(tp, type) and issubclass(tp, bytes):
        return draw(st.one_of(st.just(SUBSCRIPTION), st.binary(max_size=24)))
    return None  # make() zero-fills what we leave out


def _entity(cls: type, draw: st.DrawFn, depth: int = 0) -> Any:
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        v = _value(f, hints[f.name], draw, depth)
        if v is not None or typing.get_origin(hints[f.name]) is not None:
            kw[f.name] = v
    return make(cls, **kw)


@st.composite
def group_requests(draw: st.DrawFn) -> tuple[int, int, Any]:
    # Join, sync, heartbeat and commit twice as often: a member's life needs them in sequence.
    key = draw(st.sampled_from([*sorted(GROUP_APIS), 11, 14, 12, 8, 68]))
    spec = REGISTRY.get(key)
    assert spec is not None
    version = draw(st.integers(spec.min_version, spec.max_version))
    return key, version, _entity(request_class(key, version), draw)


class _Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(group_requests(), min_size=1, max_size=12))
def test_group_apis_answer_arbitrary_requests(
    broker: EmbeddedBroker, batch: list[tuple[int, int, Any]]
) -> None:
    failures = _Failures()
    logging.getLogger("tidelog").addHandler(failures)
    try:
        learned: list[str] = []
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            for corr, (key, version, body) in enumerate(batch, 1):
                sock.sendall(request_frame(key, version, corr, _resolve(body, learned)))
                frame = recv_frame(sock)
                assert int.from_bytes(frame[:4], "big") == corr
                resp = decode_response(key, version, frame)
                codes = error_codes(resp)
                assert ErrorCode.UNKNOWN_SERVER_ERROR not in codes, (GROUP_APIS[key], version, resp)
                assert all(c in ErrorCode._value2member_map_ for c in codes), codes
                if key == 11 and resp.member_id and resp.member_id not in learned:  # type: ignore[attr-defined]
                    learned.append(resp.member_id)  # type: ignore[attr-defined]
    finally:
        logging.getLogger("tidelog").removeHandler(failures)
    assert not failures.records, [r.getMessage() for r in failures.records]


def _resolve(obj: Any, learned: list[str]) -> Any:
    """Replace "@k" member ids with ids the broker handed out earlier in the example."""
    if isinstance(obj, str) and obj.startswith(LEARNED):
        return learned[int(obj[1:]) % len(learned)] if learned else ""
    if isinstance(obj, tuple):
        return tuple(_resolve(v, learned) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _resolve(getattr(obj, f.name), learned) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj
