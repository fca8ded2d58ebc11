"""The table's offsets hold under remote (tiered) expiry too: a tiered partition of an
Iceberg topic keeps in remote storage every segment holding an offset its table does not
have yet, past ``retention.ms``; once the table has them, they expire as usual. The floor is
put under the log the way the translator puts it there (PartitionSource.set_retention_floor);
the remote log manager's passes run one at a time on a manual clock, with a directory as
remote storage."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server" / "remote"))
from harness import TOPIC, Tiered, open_tiered

from tidelog.iceberg.log_source import PartitionSource
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from tidelog.util.topic_partition import TopicPartition


def _remote(t: Tiered) -> list[RemoteLogSegmentMetadata]:
    info = t.rm.topic(TOPIC)
    assert info is not None
    cache = t.rlm.rlmm.catch_up_for(TopicIdPartition(info.topic_id, TOPIC, 0))
    return sorted(cache.list_remote_log_segments(), key=lambda m: m.start_offset)


def test_remote_expiry_keeps_what_the_table_lacks(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote",
                    topic_configs={"retention.ms": "3600000", "local.retention.ms": "1000",
                                   "local.retention.bytes": "-2"})
    try:
        committed = {"next": 0}  # the table's next offset for partition 0
        tp = TopicPartition(TOPIC, 0)
        assert PartitionSource(t.rm).set_retention_floor(tp, lambda: committed["next"])
        t.produce(20)
        t.run()
        copied = _remote(t)
        assert len(copied) >= 3
        lg = t.log()
        t.clock.advance(3_600_000 + 60_000)  # every segment past retention.ms
        t.run()
        assert _remote(t) == copied and lg.log_start_offset == 0  # the table has nothing

        committed["next"] = copied[1].end_offset  # the table has the first segment only
        t.run()
        assert _remote(t) == copied[1:]
        assert lg.log_start_offset == copied[0].end_offset + 1 <= committed["next"]

        committed["next"] = copied[-1].end_offset + 1  # the table has everything copied
        t.run()
        assert _remote(t) == []
        assert lg.log_start_offset == copied[-1].end_offset + 1
    finally:
        t.close()
