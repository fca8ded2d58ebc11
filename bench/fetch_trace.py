"""Where a consumer's read goes, Fetch by Fetch: librdkafka's ``fetch,protocol`` debug
lines of a traced bench/rdkafka_load.py ``Consumer`` (each with its arrival time), the
broker's own RequestMetrics for Fetch (a tidelog ``/metrics``), and the producer's batches
as the log holds them (a tidelog log directory).

Per answer, from the client's lines: its size, its round trip (librdkafka's ``rtt``:
request sent -> whole response read), the records librdkafka enqueued from it, and the
client's hold (response read -> the next Fetch sent: librdkafka decodes the whole answer
before it asks again, one Fetch in flight per broker). A read of N answers takes about
the sum of their round trips and holds: the broker sets the round trips (how fast it
answers and how many bytes each answer carries, within the consumer's limits), the client
its holds (~0.3 us per record of 100 B on this kind of machine, whatever the broker).
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
    hold_ms: float | None = None  # response read -> next Fetch sent (None: the last)
    received: float = 0.0  # perf_counter() when the response was read


def answers(log: list[tuple[float, str]]) -> list[Answer]:
    """The Fetch responses of a traced read, in order: ``log`` is (time, line)."""
    out: list[Answer] = []
    for t, line in log:
        m = _RECV.search(line)
        if m:
            out.append(Answer(int(m.group(1)), float(m.group(2)), received=t))
            continue
        if not out:
            continue
        m = _ENQ.search(line)
        if m:
            out[-1].records += int(m.group(1))
        elif _SENT in line and out[-1].hold_ms is None:
            out[-1].hold_ms = (t - out[-1].received) * 1000
    return out


def summary(got: list[Answer], secs: float) -> str:
    """One line: Fetches (per second, per MiB sent), bytes and records per answer, round
    trip and hold per answer (medians), hold per record, the sums of both against the read's
    time."""
    full = [a for a in got if a.records]
    if not full:
        return "no answer with records"
    size = sum(a.size for a in full)
    records = sum(a.records for a in full)
    holds = [a.hold_ms for a in full if a.hold_ms is not None]
    rtt = sum(a.rtt_ms for a in full)
    return (f"{len(full)} fetches ({len(full) / secs:,.0f}/s, {len(full) / (size / MIB):.2f}"
            f"/MiB), {statistics.median(a.size for a in full) / MIB:.2f} MiB and "
            f"{statistics.median(a.records for a in full):,.0f} records per answer, rtt "
            f"{statistics.median(a.rtt_ms for a in full):.2f} ms (sum {rtt:.0f}), hold "
            f"{statistics.median(holds) if holds else 0:.2f} ms (sum {sum(holds):.0f}, "
            f"{sum(holds) * 1000 / max(1, sum(a.records for a in full if a.hold_ms)):.2f}"
            f" us/record), read {secs * 1000:.0f} ms, {records:,} records")


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
