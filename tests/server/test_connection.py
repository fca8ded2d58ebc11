"""Framing, ordering, KIP-511 and malformed input against a real listening broker."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from broker_wire import connect, recv_frame, request_frame
from kio.index import load_response_schema
from kio.serial import entity_reader

from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedBroker


def _api_versions(sock: socket.socket, corr: int, version: int = 3) -> object:
    sock.sendall(
        request_frame(18, version, corr, client_software_name="t", client_software_version="1")
    )
    frame = recv_frame(sock)
    assert struct.unpack_from(">i", frame)[0] == corr
    obj, _ = entity_reader(load_response_schema(18, version))(frame, 4)
    return obj


def _assert_alive(b: EmbeddedBroker) -> None:
    with connect(b) as s:
        resp = _api_versions(s, 99)
        assert resp.error_code == 0


def test_api_versions_advertises_registry(broker: EmbeddedBroker) -> None:
    with connect(broker) as s:
        resp = _api_versions(s, 1)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got[0] == (3, 13)
    assert got[1] == (4, 18)
    assert got[3] == (0, 13)
    assert got[18] == (0, 4)
    assert got[68] == (0, 1) and got[69] == (0, 1)  # KIP-848; librdkafka needs v1
    for forbidden in (71, 72):
        assert forbidden not in got


def test_api_versions_unknown_version_gets_kip511_v0_body(broker: EmbeddedBroker) -> None:
    with connect(broker) as s:
        # v9 of ApiVersions does not exist: header v2 layout, empty body
        hdr = struct.pack(">hhih", 18, 9, 5, 1) + b"x" + b"\x00"
        s.sendall(struct.pack(">i", len(hdr)) + hdr)
        frame = recv_frame(s)
    corr, err, n, key, lo, hi = struct.unpack(">ihihhh", frame)
    assert (corr, err, n, key, lo, hi) == (5, ErrorCode.UNSUPPORTED_VERSION, 1, 18, 0, 4)


def test_pipelined_responses_keep_request_order(broker: EmbeddedBroker) -> None:
    with connect(broker) as s:
        frames = b"".join(
            request_frame(3, 12, corr, topics=(), allow_auto_topic_creation=False)
            if corr % 2
            else request_frame(18, 3, corr, client_software_name="t", client_software_version="1")
            for corr in range(1, 41)
        )
        s.sendall(frames)
        corrs = [struct.unpack_from(">i", recv_frame(s))[0] for _ in range(40)]
    assert corrs == list(range(1, 41))


def test_trailing_bytes_after_body_are_ignored(broker: EmbeddedBroker) -> None:
    """librdkafka #5049: all-topics Metadata v9+ with 3 junk bytes after the body."""
    with connect(broker) as s:
        frame = request_frame(3, 12, 77, topics=None, allow_auto_topic_creation=False)
        frame = struct.pack(">i", len(frame) - 4 + 3) + frame[4:] + b"\x00\x00\x00"
        s.sendall(frame)
        resp = recv_frame(s)
    assert struct.unpack_from(">i", resp)[0] == 77


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(os.urandom(64), id="random-bytes"),
        pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"abc", id="oversized-length"),
        pytest.param(struct.pack(">i", -5), id="negative-length"),
        pytest.param(
            bytes.fromhex("160301020001000200030300") + os.urandom(40), id="tls-client-hello"
        ),
        pytest.param(struct.pack(">i", 6) + b"\x00\x12\x00", id="truncated-frame-then-eof"),
        pytest.param(struct.pack(">i", 4) + b"\x00\x12\x00\x03", id="frame-shorter-than-header"),
        pytest.param(
            struct.pack(">i", 12) + struct.pack(">hhi", 3, 12, 1) + b"\xff\x00", id="truncated-body"
        ),
        pytest.param(
            struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1), id="unknown-api-key"
        ),
    ],
)
def test_malformed_input_closes_only_that_connection(
    broker: EmbeddedBroker, payload: bytes
) -> None:
    with connect(broker) as other:
        assert _api_versions(other, 1).error_code == 0
        bad = connect(broker)
        bad.sendall(payload)
        bad.shutdown(socket.SHUT_WR)
        bad.settimeout(10)
        try:
            data = bad.recv(4096)
        except ConnectionResetError:
            data = b""
        bad.close()
        assert data == b""  # closed without a response
        # the other connection and new ones keep working
        assert _api_versions(other, 2).error_code == 0
    _assert_alive(broker)


def test_frame_over_socket_request_max_bytes_is_refused(tidelog_broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = tidelog_broker_factory({"socket.request.max.bytes": "1000"})
    with connect(b) as s:
        s.sendall(struct.pack(">i", 1001) + b"\x00" * 1001)
        s.settimeout(10)
        try:
            assert s.recv(10) == b""
        except ConnectionResetError:
            pass
    _assert_alive(b)


def test_idle_connections_are_closed(tidelog_broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = tidelog_broker_factory({"connections.max.idle.ms": "200"})
    with connect(b) as idle, connect(b) as busy:
        idle.settimeout(20)
        assert _api_versions(busy, 1).error_code == 0
        assert idle.recv(1) == b""  # closed by the broker, not by a timeout
    _assert_alive(b)


def test_slow_reader_does_not_stop_other_clients(broker: EmbeddedBroker) -> None:
    """A client that pipelines fetches of 1 MB but never reads: once its responses back up,
    the broker stops reading from it, while other connections are served."""
    from broker_wire import Wire, fetch_body, produce_body

    from tidelog.records import build_batch

    with Wire(broker) as w:
        resp = w.call(
            0,
            9,
            body=produce_body(9, "slow-reader", {0: build_batch([(1, None, b"x" * 1_000_000)])}),
        )
        assert resp.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]
    with connect(broker) as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        frame = request_frame(1, 12, 1, body=fetch_body(12, "slow-reader", {0: 0}))
        slow.sendall(frame * 64)  # 64 MB of responses the client will not read
        _assert_alive(broker)
        paused = [c for c in list(broker.broker.connections) if c._reading_paused]
        assert len(paused) == 1  # only the slow one


def test_many_connections_at_once(broker: EmbeddedBroker) -> None:
    socks = [connect(broker) for _ in range(200)]
    try:
        for i, s in enumerate(socks):
            s.sendall(
                request_frame(18, 3, i, client_software_name="t", client_software_version="1")
            )
        corrs = [struct.unpack_from(">i", recv_frame(s))[0] for s in socks]
    finally:
        for s in socks:
            s.close()
    assert corrs == list(range(200))
