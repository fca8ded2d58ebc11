"""A consumer's sessionless Fetch of many partitions with nothing new: the broker's CPU per
Fetch, in process, with the per-partition path as the reference in the same run; and (with
--e2e) goal 2's end-to-end figures through bench/tail_latency.py.

In process: a Broker on this process's event loop, one topic of PARTITIONS partitions, each
with RECORDS records (so each high watermark is past 0). The request is librdkafka's (Fetch
v16, topics by id, session id 0 and epoch -1, every partition at its high watermark, leader
epoch named, read_committed as librdkafka's default; --isolation 0: read_uncommitted). Each round runs FETCHES Fetches of each path, alternating, and takes the CPU
time of the loop's thread per Fetch (decode, the reads, the response's bytes):

* columns, native: what the broker does (protocol/fetch_request.py, the C scan);
* columns, Python: the same with the scan's pure-Python twin;
* per-partition: the request decoded by kio and read partition by partition (the path every
  other Fetch takes, and this one took before);
* long poll: columns, native, max_wait 5 ms: parked (one purgatory key per topic), timed out,
  read again, answered.

Then the live case (--new N, default 20): a Fetch of every partition where N of them (drawn
at random each time) got one new batch since the consumer's last answer, as under a
producer spread over the partitions; each partition starts with --batches one-record
batches (so a read walks the index and the batch headers as it does on a live log). Before
each Fetch, outside the timed part, the N appends; the Fetch names every partition at the
offset the consumer got to (the N at their previous high watermark). Timed: the handler's
CPU (the scan, re-answering the N, reading them from where their last quiet answer said
their next batch starts, the response), the C scan against its pure-Python twin,
alternating.

Printed: microseconds per Fetch, median [min .. max] over the rounds, each path's ratio to
the per-partition one in the same round, and the load average.

--e2e: then bench/tail_latency.py --scenarios 5000x1000 with the same --runs, for
tidelog, the minimal broker (bench/baseline_broker.py, no consumer) and Tansu when present:
produce->ack and produce->consume percentiles with one librdkafka consumer of every
partition.

    .venv/bin/python bench/fetch_partitions.py [--partitions 1000] [--rounds 7]
        [--fetches 200] [--new 20] [--batches 30] [--isolation 1] [--e2e] [--runs 3]
        [--seconds 30] [--warmup 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from kio.serial import entity_writer

from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.codec import decode_request, request_class
from tidelog.protocol.fetch_request import decode_sessionless_fetch
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.server import quiet_table, sessionless_fetches
from tidelog.server.broker import Broker
from tidelog.server.context import RequestContext
from tidelog.server.handlers import fetch
from tidelog.server.sendfile import close_chunks
from tidelog.util.topic_partition import TopicPartition

TOPIC = "many"
VERSION = 16


def fetch_frame(broker: Broker, partitions: int, max_wait_ms: int,
                offsets: list[int] | None = None, isolation: int = 1) -> bytes:
    """librdkafka's Fetch of every partition at its high watermark, or at ``offsets``
    (no size prefix); read_committed (``isolation`` 1) as librdkafka's default."""
    rm = broker.replica_manager
    cls = request_class(1, VERSION)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    parts = []
    for p in range(partitions):
        part = rm.partitions[TopicPartition(TOPIC, p)]
        parts.append(make(pcls, partition=p, current_leader_epoch=part.leader_epoch,
                          fetch_offset=part.high_watermark if offsets is None else offsets[p],
                          last_fetched_epoch=-1,
                          log_start_offset=-1, partition_max_bytes=1 << 20))
    body = make(cls, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                max_bytes=52428800, isolation_level=isolation, session_id=0, session_epoch=-1,
                topics=(make(tcls, topic_id=rm.topic(TOPIC).topic_id, partitions=tuple(parts)),),
                forgotten_topics_data=(), rack_id="")
    hdr = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr)(buf, hdr(request_api_key=1, request_api_version=VERSION,
                                correlation_id=1, client_id="rdkafka"))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def path(broker: Broker, data: bytes, columns: bool) -> Callable[[], Awaitable[int]]:
    """One Fetch through the handler: the response's size."""

    async def one() -> int:
        decoded = decode_sessionless_fetch(data, VERSION) if columns else None
        header, request = decoded if decoded is not None else decode_request(data)
        chunks = await fetch.handle(RequestContext(header, broker, "127.0.0.1", 1), request)
        return sum(len(c) for c in chunks)

    return one


async def cpu_per_fetch(one: Callable[[], Awaitable[int]], n: int) -> float:
    """Microseconds of this thread's CPU per Fetch (the loop's: nothing else runs on it)."""
    t0 = time.thread_time_ns()
    for _ in range(n):
        await one()
    return (time.thread_time_ns() - t0) / n / 1000


async def in_process(partitions: int, records: int, rounds: int, fetches: int,
                     isolation: int) -> None:
    d = tempfile.mkdtemp(prefix="tidelog-fetch-bench-")
    broker = Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": d,
                                  "auto.create.topics.enable": "false"}))
    await broker.start()
    try:
        rm = broker.replica_manager
        rm.create_topic(TOPIC, partitions)
        value = build_batch([(1_700_000_000_000 + i, None, b"v" * 100) for i in range(records)])
        for p in range(partitions):
            rm.append(TopicPartition(TOPIC, p), value)
        short = fetch_frame(broker, partitions, 0, isolation=isolation)
        polled = fetch_frame(broker, partitions, 5, isolation=isolation)
        sizes = {await path(broker, short, c)() for c in (True, False)}
        assert len(sizes) == 1, f"the two paths answer differently: {sizes}"

        async def python_scan() -> int:
            with python_twin():
                return await path(broker, short, True)()

        paths = {"columns, native": path(broker, short, True),
                 "columns, Python": python_scan,
                 "per-partition (reference)": path(broker, short, False),
                 "long poll 5 ms, native": path(broker, polled, True)}
        load = [os.getloadavg()[0]]
        got: dict[str, list[float]] = {k: [] for k in paths}
        for r in range(rounds):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                n = max(3, fetches // 10) if name.startswith("long") else fetches
                got[name].append(await cpu_per_fetch(paths[name], n))
        load.append(os.getloadavg()[0])
        print(f"Fetch v{VERSION} of {partitions} partitions, nothing new ({records} records "
              f"each, every partition at its HW), {rounds} rounds; load average "
              f"{load[0]:.1f} -> {load[1]:.1f}; response {sizes.pop():,} B")
        ref = got["per-partition (reference)"]
        for name, values in got.items():
            ratio = [v / x for v, x in zip(values, ref, strict=True)]
            print(f"  {name:<27} {statistics.median(values):8.0f} us/Fetch "
                  f"[{min(values):.0f} .. {max(values):.0f}]   x{statistics.median(ratio):.3f} "
                  f"[{min(ratio):.3f} .. {max(ratio):.3f}] of the per-partition path")
    finally:
        await broker.stop()
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def python_twin() -> Iterator[None]:
    """The sessionless Fetch's scan through its pure-Python twin for a while."""
    native = sessionless_fetches.quiet_runs
    sessionless_fetches.quiet_runs = quiet_table.quiet_runs_py
    try:
        yield
    finally:
        sessionless_fetches.quiet_runs = native


async def with_news(partitions: int, batches: int, new: int, rounds: int,
                    fetches: int, isolation: int) -> None:
    """The live case: N partitions with one new batch in each Fetch (module docstring)."""
    d = tempfile.mkdtemp(prefix="tidelog-fetch-bench-")
    broker = Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": d,
                                  "auto.create.topics.enable": "false"}))
    await broker.start()
    try:
        rm = broker.replica_manager
        rm.create_topic(TOPIC, partitions)
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        for i in range(batches):
            one = build_batch([(1_700_000_000_000 + i, None, b"v" * 100)])
            for tp in tps:
                rm.append(tp, one)
        rng = random.Random(43)
        seen = [rm.partitions[tp].high_watermark for tp in tps]  # the consumer's positions
        got: dict[str, list[float]] = {"columns, native": [], "columns, Python": []}
        load = [os.getloadavg()[0]]
        size = 0
        for r in range(rounds):
            order = list(got) if r % 2 == 0 else list(reversed(got))
            for name in order:
                spent = 0
                for i in range(fetches):
                    one = build_batch([(1_700_000_000_000 + i, None, b"v" * 100)])
                    for p in rng.sample(range(partitions), new):
                        rm.append(tps[p], one)
                    frame = fetch_frame(broker, partitions, 0, seen, isolation)
                    t0 = time.thread_time_ns()
                    with python_twin() if name.endswith("Python") else contextlib.nullcontext():
                        header, request = decode_sessionless_fetch(frame, VERSION) or (None, None)
                        assert request is not None
                        chunks = await fetch.handle(
                            RequestContext(header, broker, "127.0.0.1", 1), request)
                    spent += time.thread_time_ns() - t0
                    size = max(size, sum(len(c) for c in chunks))
                    close_chunks(chunks)
                    seen = [rm.partitions[tp].high_watermark for tp in tps]
                got[name].append(spent / fetches / 1000)
        load.append(os.getloadavg()[0])
        print(f"Fetch v{VERSION} of {partitions} partitions, {new} with one new batch each "
              f"({batches} one-record batches per partition before), {rounds} rounds of "
              f"{fetches}; load average {load[0]:.1f} -> {load[1]:.1f}; response up to "
              f"{size:,} B")
        for name, values in got.items():
            print(f"  {name:<27} {statistics.median(values):8.0f} us/Fetch "
                  f"[{min(values):.0f} .. {max(values):.0f}]")
    finally:
        await broker.stop()
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--fetches", type=int, default=200)
    ap.add_argument("--e2e", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--new", type=int, default=20)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--isolation", type=int, choices=(0, 1), default=1,
                    help="the Fetch's isolation level: 1 read_committed (librdkafka's "
                         "default), 0 read_uncommitted")
    args = ap.parse_args()
    asyncio.run(in_process(args.partitions, args.records, args.rounds, args.fetches,
                           args.isolation))
    if args.new:
        asyncio.run(with_news(args.partitions, args.batches, args.new, args.rounds,
                              max(3, args.fetches // 4), args.isolation))
    if args.e2e:
        sys.stdout.flush()
        here = Path(__file__).resolve().parent
        subprocess.run([sys.executable, str(here / "tail_latency.py"), "--scenarios",
                        f"5000x{args.partitions}", "--brokers", "tidelog,baseline,tansu",
                        "--runs", str(args.runs), "--seconds", str(args.seconds),
                        "--warmup", str(args.warmup)], check=True)


if __name__ == "__main__":
    main()
