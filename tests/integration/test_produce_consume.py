"""Every client produces (acks 0/1/all, every codec, idempotent) to a real ``tidelog serve``
and every client reads each record back with identical key, value, headers, timestamp."""

from __future__ import annotations

import time

import pytest
from broker_clients import CLIENTS, Rec, consume, make_records, produce

VARIANTS = ["acks=0", "acks=1", "acks=all", "gzip", "snappy", "lz4", "zstd", "idempotent"]


def _produce_kwargs(variant: str) -> dict[str, object]:
    if variant.startswith("acks="):
        return {"acks": variant[5:]}
    if variant == "idempotent":
        return {"acks": "all", "idempotent": True}
    return {"acks": "1", "codec": variant}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("producer", CLIENTS)
def test_produce_then_consume_with_every_client(serve, producer: str, variant: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"pc-{producer}-{variant.replace('=', '-')}"
    n = 3 if producer == "kcat" else 6
    base_ts = int(time.time() * 1000) - 60_000
    expected = make_records(f"{producer}{variant}", n, base_ts)
    before = int(time.time() * 1000)
    produce(producer, serve.bootstrap_servers, topic, expected, **_produce_kwargs(variant))  # type: ignore[arg-type]
    after = int(time.time() * 1000)
    seen: dict[str, list[Rec]] = {}
    for consumer in CLIENTS:
        got = consume(consumer, serve.bootstrap_servers, topic, n)
        assert [r.offset for r in got] == list(range(n)), consumer
        seen[consumer] = got
        if producer == "kcat":  # kcat stamps records with its own clock
            assert [(r.key, r.value, r.headers) for r in got] == [
                (e.key, e.value, e.headers) for e in expected
            ], consumer
            assert all(before - 1000 <= r.timestamp <= after + 1000 for r in got), consumer
        else:
            assert [r.content() for r in got] == [e.content() for e in expected], consumer
    # and all consumers agree with each other exactly
    first = [r.content() for r in seen[CLIENTS[0]]]
    for consumer in CLIENTS[1:]:
        assert [r.content() for r in seen[consumer]] == first, consumer
