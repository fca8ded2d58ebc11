"""Heavy batches (compressed, or 1 MiB and more) are validated and written off the event loop;
a connection's pipelined produce requests still append in the order they were sent, so an
idempotent producer with five requests in flight sees no sequence errors and every record
lands once, in order, whether its batches go off the loop or not."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tidelog.records import CompressionType, build_batch
from tidelog.server.handlers.produce import HEAVY_COMPRESSED_BYTES, is_heavy
from tidelog.testing import EmbeddedBroker

N = 6000


def test_is_heavy_by_codec_and_size() -> None:
    now = int(time.time() * 1000)
    big = [(now, None, os.urandom(200)) for _ in range(HEAVY_COMPRESSED_BYTES // 100)]
    assert is_heavy(build_batch(big, CompressionType.GZIP))
    assert not is_heavy(build_batch(big))
    assert not is_heavy(build_batch(big[:2], CompressionType.GZIP))
    assert is_heavy(build_batch([(now, None, bytes(1 << 20))]))


@pytest.mark.parametrize("codec", ["gzip", "none"])
def test_pipelined_idempotent_produce_keeps_order(codec: str) -> None:
    import confluent_kafka as ck

    with EmbeddedBroker({"num.partitions": "2"}) as b:
        p = ck.Producer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "enable.idempotence": True,
                "max.in.flight.requests.per.connection": 5,
                "compression.type": codec,
                "linger.ms": 2,
                "batch.size": 256 * 1024,
            }
        )
        errors: list[Any] = []

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for i in range(N):
            # random bytes compress poorly: compressed batches stay above the heavy bound
            value = b"%06d" % i + os.urandom(250)
            while True:
                try:
                    p.produce("ordered", value, partition=i % 2, on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(60) == 0
        assert errors == []
        c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g"})
        c.assign([ck.TopicPartition("ordered", q, ck.OFFSET_BEGINNING) for q in (0, 1)])
        got: dict[int, list[int]] = {0: [], 1: []}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < N and time.monotonic() < deadline:
            for m in c.consume(1000, 1):
                if m.error() is None:
                    got[m.partition()].append(int(m.value()[:6]))
        c.close()
    assert got[0] == list(range(0, N, 2))
    assert got[1] == list(range(1, N, 2))
