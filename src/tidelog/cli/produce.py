"""``tidelog produce``: one record per stdin line (kafka-console-producer.sh). With
``--key-separator`` each line is ``key<sep>value``. Records are batched per partition and
sent with the chosen acks and codec; a failed produce exits non-zero."""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from typing import Any

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("produce", help="produce stdin lines to a topic")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--topic", required=True)
    p.add_argument(
        "--partition", type=int, help="target partition (default: by key, else round robin)"
    )
    p.add_argument("--key-separator", help="split each line into key and value at this string")
    p.add_argument("--acks", type=int, choices=(-1, 0, 1), default=-1)
    p.add_argument("--compression", choices=sorted(CODECS), default="none")
    p.add_argument("--batch-size", type=int, default=500, help="records per batch")
    p.add_argument(
        "--no-idempotence",
        dest="idempotent",
        action="store_false",
        help="send without a producer id (Kafka producers are idempotent by default)",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K=V",
        help="add this header to every record (repeatable)",
    )
    p.set_defaults(func=run)


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (Utils.murmur2), so keys land where Java puts them."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rem = length % 4
    tail = length - rem
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def _parse(line: str, sep: str | None) -> tuple[bytes | None, bytes]:
    if sep is None:
        return None, line.encode()
    if sep not in line:
        raise ValueError(f"no key separator {sep!r} in line {line!r}")
    k, v = line.split(sep, 1)
    return k.encode(), v.encode()


class _Producer:
    """Producer id/epoch and the next sequence per partition (idempotent sends)."""

    def __init__(self, client: Any, idempotent: bool) -> None:
        ids: tuple[int, int] = client.init_producer_id() if idempotent else (-1, -1)
        self.pid, self.epoch = ids
        self.sequences: dict[int, int] = {}

    def batch(self, partition: int, recs: list[Any], codec: int, headers: list[Any]) -> bytes:
        from tidelog.records import RecordBatchBuilder

        b = RecordBatchBuilder(codec)
        if self.pid >= 0:
            seq = self.sequences.get(partition, 0)
            b = RecordBatchBuilder(
                codec, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=seq
            )
            self.sequences[partition] = seq + len(recs)
        for ts, key, value in recs:
            b.append(ts, key, value, headers)
        return b.build()


def _headers(items: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for item in items:
        if "=" not in item:
            raise ValueError(f"expected K=V header, got {item!r}")
        k, v = item.split("=", 1)
        out.append((k, v.encode()))
    return out


def _send(
    client: Any, args: argparse.Namespace, pending: dict[int, list[Any]], producer: _Producer
) -> None:
    from tidelog.protocol.client import TopicPartition

    headers = _headers(args.header)
    batches = {
        TopicPartition(args.topic, p): producer.batch(p, recs, CODECS[args.compression], headers)
        for p, recs in pending.items()
        if recs
    }
    if batches:
        leader = client.leader_for(next(iter(batches)))
        client.produce(leader, batches, acks=args.acks)
    pending.clear()


def run(args: argparse.Namespace) -> int:
    from tidelog.protocol.client import KafkaClient, KafkaClientError

    try:
        with KafkaClient(args.bootstrap_server) as client:
            parts = (
                client.partitions_for(args.topic) if args.partition is None else [args.partition]
            )
            rr = itertools.cycle(parts)
            # idempotence needs acks=all (as in every Kafka producer); off otherwise
            producer = _Producer(client, args.idempotent and args.acks == -1)
            pending: dict[int, list[Any]] = {}
            for n, raw in enumerate(sys.stdin, 1):
                key, value = _parse(raw.rstrip("\n"), args.key_separator)
                if args.partition is not None:
                    part = args.partition
                elif key is not None:
                    part = parts[(murmur2(key) & 0x7FFFFFFF) % len(parts)]
                else:
                    part = next(rr)
                pending.setdefault(part, []).append((int(time.time() * 1000), key, value))
                if n % args.batch_size == 0:
                    _send(client, args, pending, producer)
            _send(client, args, pending, producer)
    except (KafkaClientError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0
