"""An ideal fetch server: the ceiling of one consumer's read rate, whatever the broker.

It serves partition 0 of a few topics whose record batches are read once, up front, from
a broker's .log files (the bytes tidelog wrote and serves, byte for byte), and speaks just
what librdkafka's simple consumer asks of a leader (ApiVersions, Metadata, ListOffsets,
Fetch). A Fetch is answered with one slice of those bytes behind a precomputed header: the
batch holding the fetch offset is found by bisection and the answer ends where the
partition's limit (``min(partition_max_bytes, max_bytes)``) says; no record is looked at,
nothing is read from a file or copied in Python. ``--cut`` picks the answer's end:

* ``whole``: whole batches up to the limit (at least one), so nothing sent is dropped;
* ``kafka``: the limit's bytes from the first batch on, the last batch cut where the limit
  falls, as Kafka's ``LogSegment.read`` slices its file (the client drops the cut tail and
  fetches it again); a first batch larger than the limit is sent whole (``minOneMessage``).

A Fetch at the log's end waits its ``max_wait_ms`` and answers no records (the long poll,
with nothing ever produced). One thread per connection, blocking sends with the header
sent ``MSG_MORE`` ahead of the slice; a connection's thread is kept once it has closed, so
that its CPU still counts in the process's threads.

    python bench/ideal_fetch_broker.py --port 9092 --cut whole \\
        --topic consume-100=LOGDIR/consume-100-0 [--topic ...]

Run by bench/consume_trees.py (``--ideal``) beside tidelog and Tansu.
"""

from __future__ import annotations

import argparse
import bisect
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baseline_broker import api_versions  # bench/ is on the path: the script's own folder

from tidelog.protocol.codec import decode_request, encode_response, response_class
from tidelog.protocol.kio_util import make, nested
from tidelog.records.batch import iter_batches

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
# Fetch v4-v11: v2 batches, no topic ids, no flexible fields (hand-parsed below). Produce is
# advertised, never served: librdkafka reads v2 batches (its MsgVer2 feature) only from a
# broker that lists Produce v3+ beside Fetch v4+
VERSIONS = {PRODUCE: (3, 8), FETCH: (4, 11), LIST_OFFSETS: (1, 7), METADATA: (1, 12),
            API_VERSIONS: (0, 3)}
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


@dataclass(slots=True)
class Partition:
    """One partition's batches, back to back, and where each one is."""

    data: memoryview
    starts: list[int]  # byte position of each batch
    lasts: list[int]  # last offset of each batch
    end_offset: int  # the high watermark

    @classmethod
    def load(cls, directory: Path) -> Partition:
        data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
        batches = list(iter_batches(data, validate=False))
        starts = [b.position for b in batches]
        lasts = [b.last_offset for b in batches]
        end = batches[-1].position + batches[-1].size_in_bytes if batches else 0
        return cls(memoryview(data[:end]), starts, lasts, lasts[-1] + 1 if lasts else 0)

    def slice(self, offset: int, limit: int, cut: str) -> memoryview:
        """The answer's records for a fetch at ``offset`` within ``limit`` bytes."""
        i = bisect.bisect_left(self.lasts, offset)
        if i == len(self.lasts):
            return self.data[0:0]
        start = self.starts[i]
        first_end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.data)
        if cut == "kafka":
            return self.data[start:max(first_end, min(start + limit, len(self.data)))]
        # the last batch starting at or before start + limit whose end is within the limit
        j = bisect.bisect_right(self.starts, start + limit) - 1
        end = self.starts[j] if j > i else first_end
        if j + 1 >= len(self.starts) and start + limit >= len(self.data):
            end = len(self.data)
        return self.data[start:end]


class Handler(socketserver.BaseRequestHandler):
    server: Server

    def finish(self) -> None:
        """The connection's thread is parked, not ended, once its client has gone: the
        CPU it spent stays in /proc/PID/task/*/schedstat, where a benchmark sums it."""
        self.request.close()
        self.server.idle.wait()

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.server.sndbuf > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.server.sndbuf)
        f = sock.makefile("rb")
        while True:
            size = f.read(4)
            if len(size) < 4:
                return
            frame = f.read(_I32.unpack(size)[0])
            key, version = _I16.unpack_from(frame, 0)[0], _I16.unpack_from(frame, 2)[0]
            if key == FETCH:
                head, records = self.server.fetch(frame, version)
                sock.sendall(head, socket.MSG_MORE if records else 0)
                if records:
                    sock.sendall(records)
            else:
                sock.sendall(self.server.other(key, version, frame))


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, topics: dict[str, Partition], cut: str,
                 sndbuf: int = -1) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.port, self.topics, self.cut, self.sndbuf = port, topics, cut, sndbuf
        self.idle = threading.Event()  # never set: a long poll's wait, a parked thread

    def fetch(self, frame: bytes, version: int) -> tuple[bytes, memoryview]:
        """Fetch v4-v11, one topic of one partition (the simple consumer's)."""
        corr = _I32.unpack_from(frame, 4)[0]
        pos = 10 + max(0, _I16.unpack_from(frame, 8)[0])  # past the client id
        max_wait, _, max_bytes = struct.unpack_from(">iii", frame, pos + 4)
        pos += 17 + (8 if version >= 7 else 0) + 4  # ... isolation, session; topic count
        n = _I16.unpack_from(frame, pos)[0]
        name = frame[pos + 2:pos + 2 + n].decode()
        pos += 2 + n + 4 + 4 + (4 if version >= 9 else 0)  # partitions, index, leader epoch
        offset = _I64.unpack_from(frame, pos)[0]
        pos += 8 + (8 if version >= 5 else 0)
        limit = min(_I32.unpack_from(frame, pos)[0], max_bytes)
        part = self.topics[name]
        records = part.slice(offset, limit, self.cut)
        if not records:
            self.idle.wait(min(max_wait, 500) / 1000)
        return self.header(corr, version, name, part.end_offset, len(records)), records

    @staticmethod
    def header(corr: int, version: int, name: str, end: int, size: int) -> bytes:
        """A Fetch response up to its records' bytes (Fetch v4-v11's layout)."""
        t = name.encode()
        body = [_I32.pack(corr), _I32.pack(0)]  # correlation id, throttle
        if version >= 7:
            body.append(struct.pack(">hi", 0, 0))  # error, session id
        body += [_I32.pack(1), _I16.pack(len(t)), t, _I32.pack(1),
                 struct.pack(">ihqq", 0, 0, end, end)]  # index, error, HW, LSO
        if version >= 5:
            body.append(_I64.pack(0))  # log start offset
        body.append(_I32.pack(0))  # no aborted transactions
        if version >= 11:
            body.append(_I32.pack(-1))  # preferred read replica
        body.append(_I32.pack(size))
        head = b"".join(body)
        return _I32.pack(len(head) + size) + head

    def other(self, key: int, version: int, frame: bytes) -> bytes:
        corr = _I32.unpack_from(frame, 4)[0]
        if key not in (METADATA, LIST_OFFSETS):
            response = api_versions(min(version, VERSIONS[API_VERSIONS][1]), VERSIONS)
        else:
            _, request = decode_request(frame)
            response = (self.metadata if key == METADATA else self.list_offsets)(version,
                                                                                  request)
        out: bytes = encode_response(corr, response)
        return out

    def metadata(self, version: int, request: Any) -> Any:
        cls = response_class(METADATA, version)
        tcls, pcls = nested(cls, "topics"), nested(nested(cls, "topics"), "partitions")
        part = make(pcls, error_code=0, partition_index=0, leader_id=0, leader_epoch=0,
                    replica_nodes=(0,), isr_nodes=(0,), offline_replicas=())
        names = [t.name for t in request.topics] if request.topics else list(self.topics)
        topics = tuple(make(tcls, error_code=0 if n in self.topics else 3, name=n,
                            is_internal=False, partitions=(part,) if n in self.topics else (),
                            topic_authorized_operations=-2147483648) for n in names)
        broker = make(nested(cls, "brokers"), node_id=0, host="127.0.0.1", port=self.port)
        return make(cls, throttle_time=0, brokers=(broker,), cluster_id="ideal",
                    controller_id=0, topics=topics, error_code=0,
                    cluster_authorized_operations=-2147483648)

    def list_offsets(self, version: int, request: Any) -> Any:
        """-2 the earliest offset (0), anything else the end offset."""
        cls = response_class(LIST_OFFSETS, version)
        tcls, pcls = nested(cls, "topics"), nested(nested(cls, "topics"), "partitions")
        topics = []
        for t in request.topics:
            end = self.topics[t.name].end_offset
            parts = tuple(make(pcls, partition_index=p.partition_index, error_code=0,
                               timestamp=-1, leader_epoch=0,
                               offset=0 if p.timestamp == -2 else end)
                          for p in t.partitions)
            topics.append(make(tcls, name=t.name, partitions=parts))
        return make(cls, throttle_time=0, topics=tuple(topics))




def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cut", choices=["whole", "kafka"], default="whole")
    ap.add_argument("--topic", action="append", required=True, metavar="NAME=PARTITION_DIR")
    ap.add_argument("--sndbuf", type=int, default=-1,
                    help="SO_SNDBUF of each connection (Kafka's socket.send.buffer.bytes is "
                         "102400); -1 leaves Linux's autotuning")
    args = ap.parse_args()
    topics = {n: Partition.load(Path(d)) for n, d in (t.split("=", 1) for t in args.topic)}
    with Server(args.port, topics, args.cut, args.sndbuf) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
