"""bench/ideal_fetch_broker.py, the consumer's ceiling in bench/consume_trees.py --ideal:
its answers are slices of the log's bytes as Kafka's LogSegment.read would cut them (or
whole batches), and a librdkafka consumer reads every record of them, in order."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import broker as bb
import ideal_fetch_broker as ideal
import rdkafka_load

from tidelog.records import build_batch

T0 = int(time.time() * 1000)


def _log(tmp: Path, counts: list[int]) -> tuple[Path, list[bytes]]:
    """A partition directory of one .log file: batches of ``counts`` records of 100 B."""
    batches, offset = [], 0
    for n in counts:
        batches.append(build_batch([(T0, None, b"v" * 100)] * n, base_offset=offset))
        offset += n
    part = tmp / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    return part, batches


def test_slices_whole_batches_or_cut_at_the_limit(tmp_path: Path) -> None:
    part, batches = _log(tmp_path, [10, 300, 20, 40, 5])
    p = ideal.Partition.load(part)
    data = b"".join(batches)
    sizes = [len(b) for b in batches]
    assert p.end_offset == 375 and p.starts == [0, sizes[0], sum(sizes[:2]),
                                               sum(sizes[:3]), sum(sizes[:4])]
    # offset 12 is in the second batch; a limit of it and the third and half the fourth
    limit = sizes[1] + sizes[2] + sizes[3] // 2
    start = sizes[0]
    assert bytes(p.slice(12, limit, "whole")) == data[start:start + sizes[1] + sizes[2]]
    assert bytes(p.slice(12, limit, "kafka")) == data[start:start + limit]
    # a first batch larger than the limit goes whole either way (Kafka's minOneMessage)
    assert bytes(p.slice(10, 100, "kafka")) == batches[1]
    assert bytes(p.slice(10, 100, "whole")) == batches[1]
    # the log's tail fits: all of it; past the end: nothing
    assert bytes(p.slice(330, 1 << 20, "whole")) == b"".join(batches[3:])
    assert bytes(p.slice(330, 1 << 20, "kafka")) == b"".join(batches[3:])
    assert bytes(p.slice(375, 1 << 20, "whole")) == b""


def test_a_librdkafka_consumer_reads_every_record(tmp_path: Path) -> None:
    part, _ = _log(tmp_path, [700] * 12)
    for cut in ("whole", "kafka"):
        port = bb.free_port()
        proc = subprocess.Popen([sys.executable, ideal.__file__, "--port", str(port),
                                 "--cut", cut, "--topic", f"t={part}"])
        try:
            bb.wait_port(port, proc)
            c = rdkafka_load.Consumer(f"127.0.0.1:{port}", "t",
                                      config={"max.partition.fetch.bytes": 100_000})
            try:
                c.consume()  # checks offsets 0.. contiguous and no error, to the end offset
            finally:
                c.close()
        finally:
            proc.terminate()
            proc.wait(30)
        assert (c.records, c.bytes) == (8400, 840_000)
