"""Request quotas (request_percentage, Kafka's ClientRequestQuotaManager): handler time is
measured without the handler's awaits, the throttle is capped at one window, and a client over
a small request_percentage gets throttle_time_ms > 0 and is slowed down by the muted
connection while another client on the same broker is not."""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from broker_wire import Wire, decode_response, recv_frame
from kio.serial import entity_writer
from test_client_quotas import alter

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.quota import ClientQuotaManager, ClientQuotaStore, QuotaType
from tidelog.server.quota import request as request_quota
from tidelog.server.quota.request import EXEMPT_API_KEYS, _LocalTimer
from tidelog.server.quota.store import entity
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import ManualClock

METADATA_V = 12


def _ms(resp: Any) -> int:
    return int(resp.throttle_time.total_seconds() * 1000)


class _Client:
    """A raw connection sending Metadata requests under its own client id."""

    def __init__(self, b: EmbeddedBroker, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", b.port), timeout=30)
        self.client_id = client_id
        self.corr = 0

    def metadata(self) -> Any:
        self.corr += 1
        cls = request_class(3, METADATA_V)
        hdr_cls = cls.__header_schema__
        buf = io.BytesIO()
        entity_writer(hdr_cls)(buf, hdr_cls(request_api_key=3, request_api_version=METADATA_V,
                                            correlation_id=self.corr, client_id=self.client_id))
        entity_writer(cls)(buf, make(cls, topics=None))
        data = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        return decode_response(3, METADATA_V, recv_frame(self.sock))

    def close(self) -> None:
        self.sock.close()


def test_request_throttle_is_capped_at_one_window(tmp_path: Path) -> None:
    store = ClientQuotaStore(tmp_path)
    store.alter([(entity([("client-id", "c")]), {"request_percentage": 10.0})])
    mgr = ClientQuotaManager(store, window_num=11, window_size_ms=1000)
    # 10% of a thread over the 10 s minimum window is 100 percent-seconds: on quota
    assert mgr.record(QuotaType.REQUEST, "u", "c", 100.0, now_ms=0) == 0
    # 200 over: (30 - 10) / 10 * 10 s = 20 s for a byte rate, but one window (1 s) here
    assert mgr.record(QuotaType.REQUEST, "u", "c", 200.0, now_ms=0) == 1000
    assert mgr.record(QuotaType.REQUEST, "u", "other", 1e9, now_ms=0) == 0  # no quota


def test_local_time_leaves_out_the_handlers_awaits(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a manual clock: the handler runs 3 ms up to its await and 2 ms after it, while 50 ms
    pass with the handler parked; its local time is exactly the 5 ms it ran."""
    clock = ManualClock()
    monkeypatch.setattr(request_quota, "time", SimpleNamespace(perf_counter_ns=clock.nanoseconds))

    async def scenario() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[int] = loop.create_future()

        async def handler() -> int:
            clock.advance(3)
            got = await gate
            clock.advance(2)
            return got + 1

        timer = _LocalTimer(handler())
        task = asyncio.ensure_future(timer)
        await asyncio.sleep(0)  # the handler runs up to its await
        parked = timer.so_far_ns()
        clock.advance(50)  # the loop busy with something else
        gate.set_result(41)
        return await task, parked, timer.local_ns

    result, parked_ns, local_ns = asyncio.run(scenario())
    assert result == 42
    assert (parked_ns, local_ns) == (3_000_000, 5_000_000)


def test_exempt_apis_are_kafkas() -> None:
    assert {18, 17, 36} <= EXEMPT_API_KEYS  # ApiVersions, SaslHandshake, SaslAuthenticate
    assert not {0, 1, 3, 19, 32} & EXEMPT_API_KEYS  # produce, fetch, metadata, admin


def test_client_over_request_percentage_is_throttled_others_are_not(tmp_path: Path) -> None:
    """What the broker decided, not how fast the clients went: the greedy client's responses
    carry throttle_time_ms > 0 (at most one window) and its next request is answered no sooner
    than that throttle after it was sent (the muted connection: a lower bound, which a loaded
    machine only lengthens); the other client is never throttled."""
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        with Wire(b) as w:
            # 0.1% of a thread: 10 ms of handler time over the 10 s window, then throttled
            assert alter(w, [({"client-id": "greedy"}, {"request_percentage": 0.1})]) == [
                (0, None)]
        greedy, other = _Client(b, "greedy"), _Client(b, "other")
        try:
            deadline = time.monotonic() + 30
            first: list[int] = []
            while not any(first) and time.monotonic() < deadline:
                first.append(_ms(greedy.metadata()))
            assert any(first), f"never throttled after {len(first)} requests"
            rounds = []  # (throttle of request i, time from sending i to the answer of i + 1)
            for _ in range(4):
                sent = time.monotonic()
                throttle = _ms(greedy.metadata())
                greedy.metadata()
                rounds.append((throttle, (time.monotonic() - sent) * 1000))
            other_t = [_ms(other.metadata()) for _ in range(50)]
        finally:
            greedy.close()
            other.close()
    assert all(0 < t <= 1000 for t, _ in rounds), rounds  # over quota; one window at most
    assert all(waited >= t for t, waited in rounds), rounds
    assert max(first) <= 1000
    assert other_t == [0] * 50


def test_quota_window_settings_are_static_broker_configs(tmp_path: Path) -> None:
    from tidelog.server.dynamic_config import dynamic_config
    from tidelog.server.errors import ApiError

    props = {"log.dirs": str(tmp_path), "quota.window.num": "5",
             "quota.window.size.seconds": "2"}
    with EmbeddedBroker(props) as b:
        mgr = b.broker.client_quotas
        assert (mgr.window_num, mgr.window_ms) == (5, 2000)
        # read-only in Kafka (QuotaConfig is not a dynamic broker config): refused
        with pytest.raises(ApiError) as info:
            dynamic_config(b.broker).alter(str(b.broker.node_id), {"quota.window.num": "3"},
                                           validate_only=False)
        assert info.value.code == ErrorCode.INVALID_REQUEST


def _produce_throttles(b: EmbeddedBroker, client_id: str, seconds: float) -> tuple[int, int]:
    """(Produce requests sent, per librdkafka's statistics; throttle events it reported) for
    a confluent-kafka producer sending small records one request at a time for ``seconds``."""
    import json

    import confluent_kafka as ck

    throttles: list[int] = []
    requests = [0]

    def on_throttle(event: Any) -> None:
        throttles.append(int(event.throttle_time * 1000))

    def on_stats(raw: str) -> None:
        brokers = json.loads(raw)["brokers"].values()
        requests[0] = sum(br.get("req", {}).get("Produce", 0) for br in brokers)

    p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": client_id,
                     "linger.ms": 0, "max.in.flight": 1, "throttle_cb": on_throttle,
                     "statistics.interval.ms": 100, "stats_cb": on_stats})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            p.produce("rq-t", b"v" * 10)
        except BufferError:
            pass
        p.poll(0.001)
    p.flush(30)
    p.poll(0.3)  # one more statistics report
    return requests[0], sum(1 for t in throttles if t > 0)


def test_confluent_producer_over_request_percentage_sees_throttle(tmp_path: Path) -> None:
    """librdkafka's throttle_cb reports the throttle_time_ms the broker put in the slow
    client's Produce responses, and none for the other client."""
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        with Wire(b) as w:
            assert alter(w, [({"client-id": "rq-slow"}, {"request_percentage": 0.05})]) == [
                (0, None)]
        slow_requests, slow_throttles = _produce_throttles(b, "rq-slow", 3.0)
        free_requests, free_throttles = _produce_throttles(b, "rq-free", 3.0)
    assert slow_throttles > 0  # librdkafka's throttle_cb saw throttle_time_ms > 0
    assert free_throttles == 0
    assert slow_requests > 0 and free_requests > 0
