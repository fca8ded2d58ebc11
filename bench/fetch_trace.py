"""Where a consumer's read goes, Fetch by Fetch: librdkafka's ``fetch,protocol`` debug
lines of a traced bench/rdkafka_load.py ``Consumer``, the broker's own RequestMetrics for
Fetch (a tidelog ``/metrics``), and the producer's batches as the log holds them (a
tidelog log directory).

Per answer, from the client's lines: its size, its round trip (librdkafka's ``rtt``:
request sent -> whole response read) and the records librdkafka enqueued from it.
librdkafka keeps one Fetch in flight per broker and decodes a whole answer before it asks
again, so a read is the sum of its round trips plus the client's own time (the read's
time minus the round trips: decoding each answer before the next Fetch, and handing the
last records to the application). The broker sets the round trips (how fast it answers,
and how many bytes each answer carries within the consumer's limits), the client the
rest.
"""

from __future__ import annotations

import re
import statistics
import struct
import urllib.request
from dataclasses import dataclass
from pathlib import Path

_RECV = re.compile(r"Received FetchResponse \(v\d+, (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms\)")
_ENQ = re.compile(r"Enqueue (\d+) message\(s\)")
_SENT = "Sent FetchRequest"
_BATCH = struct.Struct(">qi")  # a record batch's base offset and length
_COUNT = struct.Struct(">i")  # its record count, at byte 57
MIB = 1 << 20


@dataclass(slots=True)
class Answer:
    """One Fetch response as the client saw it."""

    size: int  # bytes (the response, header included)
    rtt_ms: float  # librdkafka's: request sent -> response read
    records: int = 0  # enqueued from it


def answers(log: list[str]) -> list[Answer]:
    """The Fetch responses of a traced read, in order."""
    out: list[Answer] = []
    for line in log:
        m = _RECV.search(line)
        if m:
            out.append(Answer(int(m.group(1)), float(m.group(2))))
            continue
        m = _ENQ.search(line)
        if m and out:
            out[-1].records += int(m.group(1))
    return out


@dataclass(slots=True)
class Totals:
    """A traced read in figures (answers with records only)."""

    fetches: int
    per_s: float  # Fetches per second of the read
    per_mib: float  # Fetches per MiB of record values consumed
    sent_ratio: float  # response bytes over record values consumed
    answer_mib: float  # median answer
    records_per_answer: float  # median
    rtt_ms: float  # sum of the round trips
    client_ms: float  # the read's time outside them
    client_us: float  # that per record

    def line(self) -> str:
        return (f"{self.fetches} fetches ({self.per_s:,.0f}/s, {self.per_mib:.2f}/MiB "
                f"consumed, {self.sent_ratio:.2f} bytes sent per byte), "
                f"{self.answer_mib:.2f} MiB and {self.records_per_answer:,.0f} records per "
                f"answer, round trips {self.rtt_ms:.0f} ms, client {self.client_ms:.0f} ms "
                f"({self.client_us:.2f} us/record)")


def totals(got: list[Answer], secs: float, consumed: int) -> Totals | None:
    """``got``'s figures over a read of ``secs`` that consumed ``consumed`` value bytes."""
    full = [a for a in got if a.records]
    if not full:
        return None
    rtt = sum(a.rtt_ms for a in full)
    records = sum(a.records for a in full)
    client = secs * 1000 - rtt
    return Totals(len(full), len(full) / secs, len(full) / (consumed / MIB),
                  sum(a.size for a in full) / consumed,
                  statistics.median(a.size for a in full) / MIB,
                  statistics.median(a.records for a in full),
                  rtt, client, client * 1000 / records)


def medians(runs: list[Totals]) -> str:
    """The median of each figure over ``runs``, as ``Totals.line`` prints one."""
    fields = Totals.__slots__
    mid = {f: statistics.median(getattr(t, f) for t in runs) for f in fields}
    mid["fetches"] = round(mid["fetches"])
    return Totals(**mid).line()


def log_batches(log_dir: Path, topic: str, partition: int = 0) -> tuple[int, int]:
    """(batches, records) in the partition's segments: the producer's batching as kept."""
    batches = records = 0
    for seg in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            _, length = _BATCH.unpack_from(data, pos)
            if length <= 0:
                break
            batches += 1
            records += _COUNT.unpack_from(data, pos + 57)[0]
            pos += 12 + length
    return batches, records


_STAGES = ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems",
           "responsequeuetimems", "responsesendtimems")


def fetch_metrics(base_url: str) -> dict[str, float]:
    """The broker's RequestMetrics of Fetch: each stage's _sum (ms) and the _count."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for stage in _STAGES:
        name = f"kafka_network_requestmetrics_{stage}"
        for kind in ("sum", "count"):
            m = re.search(rf'^{name}_{kind}{{request="Fetch"}} (\S+)$', text, re.M)
            out[f"{stage}_{kind}"] = float(m.group(1)) if m else 0.0
    return out


def broker_side(before: dict[str, float], after: dict[str, float]) -> str:
    """Mean ms per Fetch in each stage between two ``fetch_metrics`` scrapes."""
    n = after["totaltimems_count"] - before["totaltimems_count"]
    if n <= 0:
        return "no Fetch"
    means = {s: (after[f"{s}_sum"] - before[f"{s}_sum"]) / n for s in _STAGES}
    return f"{n:.0f} Fetches, ms each: " + ", ".join(
        f"{s.removesuffix('timems')} {v:.3f}" for s, v in means.items())
