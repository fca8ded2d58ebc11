"""The broker's CPU per Produce request, in-process: frames as librdkafka sends them fed to a
connection of a real broker (its log dir on disk), no sockets.

Each frame goes through what a request read from a socket goes through
(``KafkaConnection.data_received``: framing, header, decode, the produce handler with its ACL
and quota checks, ``ReplicaManager.append_records``, the log's validation, offsets, producer
state, indexes and segment write, the response encoded and written to the transport, which
here only keeps it). Shapes:

* ``one``: librdkafka's shape over many partitions (one idempotent producer, acks=all,
  linger.ms 0, 100 B values): Produce v10, one partition per request, one record per batch,
  the partitions in turn (``--partitions``, default 1,000), each batch's sequence following;
* ``batch100`` / ``batch1k``: librdkafka's throughput shape (acks=1, linger.ms 5, batch.size
  1 MB): one partition, 1 MB batches of 100 B or 1 KiB records, read in chunks of at most
  256 KiB as a transport reads a socket: into the buffer the connection's ``get_buffer``
  hands out, then ``buffer_updated`` (the copy standing for the kernel's; a tree whose
  connection has no ``get_buffer`` is fed 256 KiB pieces through ``data_received``).

Printed per shape: the loop thread's CPU (``time.thread_time``) per request and per record,
median [min .. max] over ``--runs``, and with ``--profile`` the Python calls per request and
the functions that cost most (cProfile, one extra run). With ``--sleep-us N`` the ``one``
runs are cold: the loop's thread sleeps N us before each request (as a loop sleeps in its
poll between a paced client's requests) and only each request's own thread CPU is counted
(two ``thread_time_ns`` reads a request, some 0.5 us, included). With ``--per-read K`` each
read of ``one`` holds K whole frames, as the reads of a loop that fell behind its clients
(the connection's general steps, ``KafkaConnection._take``, answer them; cold, the thread
sleeps before each read).

With ``--twin`` the common Produce is answered by its Python path rather than the native
``produce_one_now`` (server/produce_one.py): alternate the two for a comparison. With
``--twin-take`` only the connection's steps around it are Python's (``_take_one``, rather
than the native ``take_one_now`` of server/connection_now.py). ``--modes native,twin-take,
twin`` alternates them run by run on one broker (the order turned each round) and prints
each one's CPU over the first's, paired by round: on a machine whose speed drifts, the
comparison to read.

On a busy machine the CPU time moves with the load; the instructions do not. With
``--callgrind``, run under valgrind's callgrind with its instrumentation off, one extra run
of ``one`` is instrumented (``callgrind_control``) and nothing else; its instructions divided
by ``--requests`` are the instructions per request (``one`` only):

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=cg.out \
        .venv/bin/python bench/produce_path.py --shapes one --partitions 1 --runs 1 \
        --requests 1000 --callgrind
    callgrind_annotate cg.out | grep TOTALS

    .venv/bin/python bench/produce_path.py [--shapes one,batch100,batch1k] [--runs 5]
        [--requests 5000] [--partitions 1000] [--profile] [--callgrind] [--twin | --twin-take | --modes M,M]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import resource
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
from typing import Any

from tidelog.client.wire import encode_request
from tidelog.config.broker_config import BrokerConfig
from tidelog.records.builder import RecordBatchBuilder
from tidelog.server import connection_now
from tidelog.server.broker import Broker
from tidelog.server.connection import KafkaConnection

VERSION = 10  # librdkafka 2.x's Produce
CHUNK = 256 << 10


class Transport:
    """What a connection writes to: kept, counted, dropped."""

    def __init__(self) -> None:
        self.answers = 0
        self.last = b""

    def write(self, data: bytes) -> None:
        self.answers += 1
        self.last = data

    def writelines(self, chunks: list[bytes]) -> None:
        self.answers += len(chunks)
        self.last = chunks[-1]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def is_closing(self) -> bool:
        return False

    def close(self) -> None: ...

    def abort(self) -> None: ...


def frame(key: int, version: int, corr: int, body: dict[str, Any]) -> bytes:
    return encode_request(key, version, corr, "rdkafka", body)


def produce_frame(corr: int, topic: str, partition: int, records: bytes, acks: int) -> bytes:
    return frame(0, VERSION, corr, {
        "transactional_id": None, "acks": acks, "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})


def one_record_frames(topic: str, partitions: int, n: int, pid: int, epoch: int) -> list[bytes]:
    value = b"v" * 100
    out = []
    for i in range(n):
        p, seq = i % partitions, i // partitions
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        b.append(1_700_000_000_000 + i, None, value)
        out.append(produce_frame(i + 100, topic, p, b.build(), -1))
    return out


def batch_frames(topic: str, size: int, n: int) -> list[bytes]:
    value = os.urandom(size // 2).hex().encode()[:size]
    b = RecordBatchBuilder()
    while len(b) * (size + 12) < 1_000_000 - size:
        b.append(1_700_000_000_000 + len(b), None, value)
    batch = b.build()
    return [produce_frame(i + 100, topic, 0, batch, 1) for i in range(n)]


class Bench:
    def __init__(self, partitions: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="produce-path-", dir=os.environ.get("BENCH_DIR"))
        self.partitions = partitions
        self.broker = Broker(BrokerConfig({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": self.dir,
            "num.partitions": str(partitions)}))
        self.transport = Transport()
        self.conn: KafkaConnection | None = None
        self.corr = 0
        self.faults: list[float] = []  # minor page faults per request, per run

    async def start(self) -> None:
        await self.broker.start()
        self.conn = KafkaConnection(self.broker)
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    async def stop(self) -> None:
        await self.broker.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    async def send(self, f: bytes, timeout: float = 60) -> bytes:
        """Feed one request; its answer (waited for on the loop: a CreateTopics suspends)."""
        assert self.conn is not None
        before = self.transport.answers
        self.conn.data_received(f)
        deadline = time.monotonic() + timeout
        while self.transport.answers == before:
            assert time.monotonic() < deadline, "no answer"
            await asyncio.sleep(0.01)
        return self.transport.last

    async def create(self, topic: str, partitions: int) -> None:
        self.corr += 1
        await self.send(frame(19, 4, self.corr, {"topics": [
            {"name": topic, "num_partitions": partitions, "replication_factor": 1,
             "assignments": [], "configs": []}], "timeout_ms": 30_000,
            "validate_only": False}))

    async def init_producer_id(self) -> tuple[int, int]:
        self.corr += 1
        answer = await self.send(frame(22, 4, self.corr, {"transactional_id": None,
                                                    "transaction_timeout_ms": 60_000,
                                                    "producer_id": -1, "producer_epoch": -1}))
        # size, correlation id, tag count, throttle, error, producer id, epoch
        _size, _corr, _tags, _throttle, error, pid, epoch = struct.unpack_from(
            ">iiBihqh", answer)
        assert error == 0, error
        return pid, epoch

    def run(self, frames: list[bytes], chunked: bool,
            profile: cProfile.Profile | None = None, sleep_us: int = 0,
            per_read: int = 1) -> float:
        """The loop thread's CPU seconds to answer ``frames`` (with ``sleep_us``, each read
        after the thread slept that long, only the reads' own CPU counted), ``per_read``
        whole frames a read."""
        assert self.conn is not None
        conn = self.conn
        before = self.transport.answers
        reads = [b"".join(frames[i:i + per_read]) for i in range(0, len(frames), per_read)] \
            if per_read > 1 else frames
        if sleep_us:
            faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            cpu = cold(conn, reads, sleep_us / 1e6)
            self.faults.append(
                (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults) / len(frames))
            assert self.transport.answers - before == len(frames), "every request answered"
            return cpu
        data = b"".join(frames) if chunked else b""
        buffered = chunked and hasattr(conn, "get_buffer")
        if chunked and not buffered:
            pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
        else:
            pieces = reads
        if profile is not None:
            profile.enable()
        faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        t = time.thread_time()
        if buffered:
            received(conn, data)
        else:
            for piece in pieces:
                conn.data_received(piece)
        cpu = time.thread_time() - t
        self.faults.append(
            (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults) / len(frames))
        if profile is not None:
            profile.disable()
        assert self.transport.answers - before == len(frames), "every request answered"
        return cpu


def cold(conn: Any, reads: list[bytes], sleep_s: float) -> float:
    """The thread's CPU to answer ``reads``, each fed after the thread slept ``sleep_s``
    (as the loop sleeps in its poll between a paced client's requests: the caches and the
    branch predictors left to whatever ran meanwhile), each read's own CPU summed."""
    sleep, clock = time.sleep, time.thread_time_ns
    total = 0
    for f in reads:
        sleep(sleep_s)
        t = clock()
        conn.data_received(f)
        total += clock() - t
    return total / 1e9


def received(conn: Any, data: bytes) -> None:
    """``data`` read as a transport reads it: at most CHUNK bytes a read, into the buffer
    the connection hands out."""
    with memoryview(data) as src:
        pos, end = 0, len(data)
        while pos < end:
            buf = conn.get_buffer(-1)
            n = min(len(buf), CHUNK, end - pos)
            buf[:n] = src[pos:pos + n]
            del buf
            conn.buffer_updated(n)
            pos += n


async def warm(bench: Bench, frames: list[bytes], chunked: bool) -> None:
    """Feed ``frames`` and wait for every answer (the first append to a partition starts its
    leader epoch: answered once the checkpoint is fsynced, off the loop)."""
    assert bench.conn is not None
    before = bench.transport.answers
    pieces = [b"".join(frames)] if chunked else frames
    for piece in pieces:
        bench.conn.data_received(piece)
        await asyncio.sleep(0)
    deadline = time.monotonic() + 300
    while bench.transport.answers - before < len(frames):
        assert time.monotonic() < deadline, "warm-up not answered"
        await asyncio.sleep(0.01)
    await wait_writes(bench)


def check_answer(answer: bytes) -> None:
    """The last answer names one partition with error 0 (v10: flexible, one topic)."""
    # size, corr, header tags, topics (compact: n+1), name (compact), partitions, index, error
    pos = 4 + 4 + 1 + 1
    name_len = answer[pos] - 1
    pos += 1 + name_len + 1 + 4
    (error,) = struct.unpack_from(">h", answer, pos)
    assert error == 0, f"produce answered error {error}"


async def shape_one(args: argparse.Namespace) -> None:
    bench = Bench(args.partitions)
    await bench.start()
    try:
        await bench.create("one", args.partitions)
        pid, epoch = await bench.init_producer_id()
        modes = args.modes.split(",") if args.modes else []
        total = args.requests * (args.runs * max(1, len(modes)) + 2)
        frames = one_record_frames("one", args.partitions, total, pid, epoch)
        # warm-up: the first append to each partition starts its leader epoch (fsynced
        # checkpoint, written aside) and opens its segment files
        first = max(args.partitions, args.requests)
        await warm(bench, frames[:first], False)
        gc.collect()
        gc.freeze()  # as tidelog serve does once the hosted partitions held still
        cold_note = f", cold (the thread asleep {args.sleep_us} us before each read)" \
            if args.sleep_us else ""
        reads = f", {args.per_read} frames a read" if args.per_read > 1 else ""
        title = f"one: 1 record of 100 B per request, {args.partitions:,} partitions, " \
                f"v{VERSION}, idempotent, acks=-1{reads}{cold_note}"
        if modes:
            pos = alternated(bench, args, frames, first, modes, title)
        else:
            cpus = []
            pos = first
            for _ in range(args.runs):
                part = frames[pos:pos + args.requests]
                pos += len(part)
                cpus.append(bench.run(part, False, sleep_us=args.sleep_us,
                                      per_read=args.per_read) / len(part))
            check_answer(bench.transport.last)
            report(bench, title, cpus, 1)
        if args.profile:
            part = frames[pos:pos + args.requests]
            profile(bench, part, False, len(part))
        elif args.callgrind:
            instrumented(bench, frames[pos:pos + args.requests], args.per_read)
    finally:
        await bench.stop()


MODES = {"native": (True, True), "twin-take": (True, False), "twin": (False, False)}


def alternated(bench: Bench, args: argparse.Namespace, frames: list[bytes], pos: int,
               modes: list[str], title: str) -> int:
    """``--runs`` rounds, each running every mode once (the order turned each round) on the
    same broker: the CPU per request of each, and each mode's over the first's, paired by
    round. Returns where the frames used end."""
    native = (connection_now.produce_one_now, connection_now.take_one_now)
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    try:
        for r in range(args.runs):
            for m in modes[r % len(modes):] + modes[:r % len(modes)]:
                produce, take = MODES[m]
                connection_now.produce_one_now = native[0] if produce else None
                connection_now.take_one_now = native[1] if take else None
                part = frames[pos:pos + args.requests]
                pos += len(part)
                cpus[m].append(bench.run(part, False, sleep_us=args.sleep_us,
                                         per_read=args.per_read) / len(part))
    finally:
        connection_now.produce_one_now, connection_now.take_one_now = native
    check_answer(bench.transport.last)
    print(title, flush=True)
    for m in modes:
        us = sorted(c * 1e6 for c in cpus[m])
        ratios = sorted(a / b for a, b in zip(cpus[m], cpus[modes[0]], strict=True))
        print(f"  {m:<10} loop CPU per request {statistics.median(us):.1f} [{us[0]:.1f} .. "
              f"{us[-1]:.1f}] us; over {modes[0]} per round {statistics.median(ratios):.3f} "
              f"[{ratios[0]:.3f} .. {ratios[-1]:.3f}]", flush=True)
    return pos


def instrumented(bench: Bench, frames: list[bytes], per_read: int) -> None:
    """``frames`` answered with callgrind's instrumentation on (this process under valgrind
    --tool=callgrind --instr-atstart=no)."""
    def toggle(state: str) -> None:
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True,
                       capture_output=True)

    toggle("on")
    try:
        bench.run(frames, False, per_read=per_read)
    finally:
        toggle("off")
    print(f"  instrumented: {len(frames):,} requests (callgrind's totals / {len(frames):,}: "
          "instructions per request)", flush=True)


async def shape_batch(args: argparse.Namespace, size: int) -> None:
    bench = Bench(1)
    await bench.start()
    try:
        await bench.create("batch", 1)
        n = max(4, args.requests // 200)
        frames = batch_frames("batch", size, n)
        await warm(bench, frames, True)
        gc.collect()
        gc.freeze()
        cpus = []
        for _ in range(args.runs):
            cpus.append(bench.run(frames, True) / n)
            await wait_writes(bench)
        records = records_of(frames[0])
        report(bench, f"batch{size}: {records:,} records of {size} B per request (1 MB batches), "
               f"one partition, acks=1, read in {CHUNK >> 10} KiB chunks", cpus, records)
        if args.profile:
            profile(bench, frames, True, n)
    finally:
        await bench.stop()


def records_of(f: bytes) -> int:
    """The record count of the one batch at the end of a produce frame (v10: one topic,
    one partition, a flexible request ends with the partition's, topic's and request's
    tag counts: 3 bytes after the records)."""
    size_pos = len(f) - 3
    # the batch ends at size_pos; its header's record count sits at byte 57 of the batch
    # and the batch length at byte 8: walk back from the end using the batch length
    for start in range(size_pos - 61, 0, -1):
        if struct.unpack_from(">i", f, start + 8)[0] + 12 == size_pos - start:
            return int(struct.unpack_from(">i", f, start + 57)[0])
    raise ValueError("no batch")


async def wait_writes(bench: Bench) -> None:
    """Let the writes handed to the writer thread complete (the completions reach the loop)."""
    for lg in bench.broker.replica_manager.logs.all_logs():
        lg.wait_for_writes()
    for _ in range(3):
        await asyncio.sleep(0.01)


def report(bench: Bench, title: str, cpus: list[float], records: int) -> None:
    us = sorted(c * 1e6 for c in cpus)
    med = statistics.median(us)
    per = "" if records == 1 else (
        f"; per record {med / records * 1e3:,.1f} [{us[0] / records * 1e3:,.1f} .. "
        f"{us[-1] / records * 1e3:,.1f}] ns")
    faults = statistics.median(bench.faults[-len(cpus):])
    print(f"{title}\n  loop CPU per request {med:,.1f} [{us[0]:,.1f} .. {us[-1]:,.1f}] us"
          f"{per}; minor page faults per request {faults:,.1f}", flush=True)


def profile(bench: Bench, frames: list[bytes], chunked: bool, requests: int) -> None:
    prof = cProfile.Profile()
    bench.run(frames, chunked, prof)
    stats = pstats.Stats(prof)
    calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"  profiled: {calls / requests:,.0f} Python calls per request; by own time:")
    stats.sort_stats("tottime").print_stats(int(os.environ.get("PROFILE_LINES", "25")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="one,batch100,batch1k")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sleep-us", type=int, default=0,
                    help="`one` run cold: the loop's thread asleep this long before each "
                         "request, only the requests' own thread CPU counted (e.g. 200)")
    ap.add_argument("--per-read", type=int, default=1,
                    help="`one` only: this many whole frames in each read (as a loop that "
                         "fell behind reads them), answered by the connection's general "
                         "steps")
    ap.add_argument("--callgrind", action="store_true",
                    help="under valgrind --tool=callgrind --instr-atstart=no: one more run "
                         "of `one`, instrumented")
    ap.add_argument("--twin", action="store_true",
                    help="the common Produce answered by Python (handle_now) rather than "
                         "the native produce_one_now (server/produce_one.py), its frame "
                         "taken by Python too")
    ap.add_argument("--twin-take", action="store_true",
                    help="only the connection's steps around the native produce in Python "
                         "(ConnectionNow._take_one) rather than the native take_one_now")
    ap.add_argument("--modes", default="",
                    help="`one` only: these of native, twin-take, twin alternated run by "
                         "run on one broker (e.g. native,twin-take,twin), paired ratios")
    args = ap.parse_args()
    if args.modes and not set(args.modes.split(",")) <= set(MODES):
        raise SystemExit(f"--modes: of {', '.join(MODES)}")
    if args.modes and connection_now.take_one_now is None:
        raise SystemExit("--modes needs the native core")
    if args.twin:
        connection_now.produce_one_now = None
    if args.twin or args.twin_take:
        connection_now.take_one_now = None
    print(f"load average {os.getloadavg()[0]:.2f}, common Produce "
          f"{'python' if connection_now.produce_one_now is None else 'native'}, its frame "
          f"taken by {'python' if connection_now.take_one_now is None else 'native'}",
          flush=True)
    try:
        import uvloop
        run: Any = uvloop.run
    except ImportError:
        run = asyncio.run
    for shape in args.shapes.split(","):
        if shape == "one":
            run(shape_one(args))
        elif shape.startswith("batch"):
            run(shape_batch(args, 1024 if shape == "batch1k" else 100))
        else:
            raise SystemExit(f"unknown shape {shape}")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
