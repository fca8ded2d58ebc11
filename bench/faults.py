"""A healthy producer's latency while heavy requests are in flight, and descriptors per
partition: before/after in the same run.

One client sends small acks=1 produce requests back to back on its own connection and
records each round trip. Meanwhile, one phase at a time: a 2000-partition CreateTopics, eight
gzip "decompression bombs" (a few hundred KB each, inflating to 250 MiB) sent at once, and one
100 MB record. Each phase prints the healthy producer's p50/p99/max latency and the heavy
request's own outcome and duration; then the broker's descriptors per partition.

"Before" is another source tree of tidelog (a ``git worktree add`` of an older commit), run
by the same script in the same run: its broker is started with that tree on PYTHONPATH.

Usage: python bench/faults.py [--before PATH_TO_OLD_TREE] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kio.serial import entity_reader, entity_writer  # noqa: E402

from tidelog.protocol.codec import request_class, response_class  # noqa: E402
from tidelog.protocol.kio_util import make, nested  # noqa: E402
from tidelog.records import CompressionType, build_batch  # noqa: E402
from tidelog.records.builder import assemble_batch  # noqa: E402
from tidelog.records.varint import encode_varint  # noqa: E402

BIG = 100 * 1024 * 1024
BOMB_INFLATED = 250 * 1024 * 1024


# -- wire -------------------------------------------------------------------------------------
class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=300)
        self.corr = 0

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.corr += 1
        cls = request_class(api_key, version)
        hdr = cls.__header_schema__
        buf = io.BytesIO()
        entity_writer(hdr)(buf, hdr(request_api_key=api_key, request_api_version=version,
                                    correlation_id=self.corr, client_id="bench"))
        entity_writer(cls)(buf, body)
        data = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        (n,) = struct.unpack(">i", self._read(4))
        frame = self._read(n)
        rcls = response_class(api_key, version)
        offset = 5 if rcls.__header_schema__.__version__ >= 1 else 4
        return entity_reader(rcls)(frame, offset)[0]

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return bytes(out)


def produce_body(topic: str, records: bytes, acks: int = 1) -> Any:
    cls = request_class(0, 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    return make(cls, transactional_id=None, acks=acks, timeout=300000, topic_data=(
        make(tcls, name=topic, partition_data=(make(pcls, index=0, records=records),)),))


def produce_code(conn: Conn, topic: str, records: bytes) -> int:
    resp = conn.call(0, 9, produce_body(topic, records))
    return int(resp.responses[0].partition_responses[0].error_code)


def create_topic(conn: Conn, name: str, partitions: int) -> int:
    cls = request_class(19, 5)
    tcls = nested(cls, "topics")
    body = make(cls, topics=(make(tcls, name=name, num_partitions=partitions,
                                  replication_factor=1, assignments=(), configs=()),),
                timeout=600000, validate_only=False)
    return int(conn.call(19, 5, body).topics[0].error_code)


# -- payloads ---------------------------------------------------------------------------------
def bomb() -> bytes:
    """A valid gzip batch of one record whose value is 250 MiB of zeros (compressed ~1000x):
    a broker without a decompression bound accepts it after inflating all of it."""
    n = BOMB_INFLATED
    body_head = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(n)
    body_tail = encode_varint(0)  # no headers
    record_head = encode_varint(len(body_head) + n + len(body_tail)) + body_head
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [z.compress(record_head)]
    parts += [z.compress(chunk) for _ in range(n >> 20)]
    payload = b"".join(parts) + z.compress(body_tail) + z.flush()
    now = int(time.time() * 1000)
    return assemble_batch(
        base_offset=0, partition_leader_epoch=-1, attributes=int(CompressionType.GZIP),
        last_offset_delta=0, base_timestamp=now, max_timestamp=now, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, records_count=1, payload=payload)


# -- broker -----------------------------------------------------------------------------------
def start_broker(src: Path, log_dir: Path) -> tuple[subprocess.Popen[str], int]:
    # the same (pure-Python) record walk in both trees: only the fault handling differs
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONUNBUFFERED": "1",
           "TIDELOG_PURE_PYTHON": "1"}
    cmd = [sys.executable, "-m", "tidelog.cli.main", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={log_dir}",
           "--override", f"message.max.bytes={BIG + (1 << 20)}",
           "--override", f"socket.request.max.bytes={BIG + (2 << 20)}"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on" in line:
            port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
            threading.Thread(target=lambda: [None for _ in proc.stderr or []], daemon=True).start()
            return proc, port
    raise RuntimeError("broker did not start")


def peak_rss_mib(proc: subprocess.Popen[str]) -> float:
    """The broker's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def fds(proc: subprocess.Popen[str]) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


# -- the healthy producer ---------------------------------------------------------------------
class Healthy(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.conn = Conn(port)
        self.samples: list[tuple[float, float]] = []  # (sent at, latency s)
        self.stop = threading.Event()

    def run(self) -> None:
        batch = build_batch([(int(time.time() * 1000), None, b"x" * 100)])
        while not self.stop.is_set():
            t0 = time.perf_counter()
            produce_code(self.conn, "healthy", batch)
            self.samples.append((t0, time.perf_counter() - t0))

    def window(self, start: float, end: float) -> list[float]:
        """Round trips that overlap [start, end]: a request stalled across the whole phase
        (sent just before it) counts too."""
        return sorted(lat for t, lat in self.samples if t <= end and t + lat >= start)


def stats(lat: list[float]) -> str:
    if not lat:
        return "no samples"
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return (f"n={len(lat):5d} p50={statistics.median(lat) * 1000:8.1f} ms "
            f"p99={p99 * 1000:8.1f} ms max={lat[-1] * 1000:8.1f} ms")


def phase(h: Healthy, name: str, fn: Any, proc: subprocess.Popen[str]) -> None:
    time.sleep(0.5)  # a quiet gap between phases
    t0 = time.perf_counter()
    outcome = fn()
    t1 = time.perf_counter()
    time.sleep(0.2)  # let a round trip stalled by the phase complete before reading
    print(f"  {name:<26} {stats(h.window(t0, t1))}  (took {t1 - t0:6.1f} s: {outcome}; "
          f"peak RSS {peak_rss_mib(proc):.0f} MiB)", flush=True)


def _idle(seconds: float) -> str:
    time.sleep(seconds)
    return "-"


def run(label: str, src: Path, bombs: list[bytes], big: bytes) -> None:
    print(f"{label}: broker from {src}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tidelog-faults-") as tmp:
        proc, port = start_broker(src, Path(tmp))
        try:
            admin = Conn(port)
            create_topic(admin, "healthy", 1)
            create_topic(admin, "heavy", 1)
            h = Healthy(port)
            h.start()
            phase(h, "idle (baseline, 3 s)", lambda: _idle(3), proc)
            before = fds(proc)
            phase(h, "CreateTopics 2000 parts",
                  lambda: f"code {create_topic(admin, 'wide', 2000)}", proc)
            per = (fds(proc) - before) / 2000
            codes: list[int] = []

            def bombs_at_once() -> str:
                def one(b: bytes) -> None:
                    codes.append(produce_code(Conn(port), "heavy", b))
                ts = [threading.Thread(target=one, args=(b,)) for b in bombs]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                return f"codes {sorted(set(codes))}"

            phase(h, "8 gzip bombs (250 MiB)", bombs_at_once, proc)
            phase(h, "one 100 MB record",
                  lambda: f"code {produce_code(Conn(port), 'heavy', big)}", proc)
            h.stop.set()
            h.join(30)
            print(f"  descriptors per partition: {per:.2f}", flush=True)
        finally:
            proc.terminate()
            proc.wait(60)


def big_record_rss(label: str, src: Path, big: bytes) -> None:
    """Peak RSS growth of a fresh broker for one acks=1 produce of ``big`` (VmHWM after the
    request minus VmHWM once the topic exists): what one huge request costs in memory."""
    with tempfile.TemporaryDirectory(prefix="tidelog-faults-") as tmp:
        proc, port = start_broker(src, Path(tmp))
        try:
            conn = Conn(port)
            create_topic(conn, "heavy", 1)
            produce_code(conn, "heavy", build_batch([(int(time.time() * 1000), None, b"x")]))
            base = peak_rss_mib(proc)
            t0 = time.perf_counter()
            code = produce_code(conn, "heavy", big)
            took = time.perf_counter() - t0
            grew = peak_rss_mib(proc) - base
            print(f"  {label:<8} one {len(big) >> 20} MiB record: code {code}, peak RSS +{grew:.0f} "
                  f"MiB ({grew * (1 << 20) / len(big):.2f}x the record), {took:.2f} s", flush=True)
        finally:
            proc.terminate()
            proc.wait(60)


def create_only(label: str, src: Path, partitions: int) -> None:
    """One CreateTopics of ``partitions`` on a fresh broker, with the healthy producer."""
    print(f"{label}: broker from {src}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tidelog-faults-") as tmp:
        proc, port = start_broker(src, Path(tmp))
        try:
            admin = Conn(port)
            create_topic(admin, "healthy", 1)
            h = Healthy(port)
            h.start()
            phase(h, f"CreateTopics {partitions} parts",
                  lambda: f"code {create_topic(admin, 'wide', partitions)}", proc)
            h.stop.set()
            h.join(30)
        finally:
            proc.terminate()
            proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="an older tidelog checkout (git worktree)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--big-only", action="store_true",
                    help="only the peak RSS growth of one 100 MB record, on a fresh broker")
    ap.add_argument("--create-only", type=int, metavar="PARTITIONS",
                    help="only one CreateTopics of this many partitions")
    args = ap.parse_args()
    if args.create_only:
        for i in range(args.repeat):
            if args.before is not None:
                create_only(f"[{i + 1}] before", args.before / "src", args.create_only)
            create_only(f"[{i + 1}] after", ROOT / "src", args.create_only)
        return
    if args.big_only:
        big = build_batch([(int(time.time() * 1000), None, bytes(BIG))])
        for _ in range(args.repeat):
            if args.before is not None:
                big_record_rss("before", args.before / "src", big)
            big_record_rss("after", ROOT / "src", big)
        return
    print("building payloads ...", flush=True)
    one_bomb = bomb()
    print(f"  bomb: {len(one_bomb)} bytes on the wire, {BOMB_INFLATED >> 20} MiB inflated")
    bombs = [one_bomb] * 8
    big = build_batch([(int(time.time() * 1000), None, bytes(BIG))])
    for i in range(args.repeat):
        if args.before is not None:
            run(f"[{i + 1}] before", args.before / "src", bombs, big)
        run(f"[{i + 1}] after", ROOT / "src", bombs, big)


if __name__ == "__main__":
    main()
