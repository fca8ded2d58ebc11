"""Remote reads through Kafka's RemoteIndexCache (SeaweedFS as remote storage): the first
fetch of a remote segment fetches its indexes into ``<log dir>/remote-log-index-cache``,
later fetches of it (at other offsets, read_committed too) read them there, and a fetch of
another segment adds its entry; the records are the same as without the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidelog.records.batch import iter_batches
from tidelog.server.remote_log_reader import RemoteStorageFetchInfo
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.testing.seaweedfs import S3Bucket

from .harness import TOPIC, open_tiered


def test_remote_reads_take_the_indexes_from_the_cache(tmp_path: Path,
                                                      s3_bucket: S3Bucket) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "unused", index_cache_bytes=1 << 30,
                    topic_configs={"index.interval.bytes": "256"}, **s3_bucket.rsm_configs)
    try:
        t.produce(30)
        t.run()
        info = t.rm.topic(TOPIC)
        assert info is not None and info.topic_id is not None
        tip = TopicIdPartition(info.topic_id, TOPIC, 0)
        segments = sorted(t.rlm.rlmm.catch_up_for(tip).list_remote_log_segments(),
                          key=lambda m: m.start_offset)
        assert len(segments) >= 3
        cache = t.rlm.index_cache
        assert cache is not None

        def read(offset: int, committed: bool = False) -> list[int]:
            fetch = RemoteStorageFetchInfo(tip, offset, 1 << 20, True, committed)
            result = asyncio.run(t.rlm.read(fetch, t.log()))
            assert result.error is None
            return [b.base_offset for b in iter_batches(result.records)]

        first = segments[0]
        assert read(0)[0] == 0
        assert (cache.misses, cache.hits) == (1, 0)
        assert read(first.end_offset)[0] == first.end_offset
        # the offset index; no transaction index: the segments' metadata says they are
        # empty (KIP-1058's txnIndexEmpty), so a read_committed read fetches none
        assert read(1, committed=True)[0] == 1
        assert (cache.misses, cache.hits) == (1, 2)
        assert read(segments[1].start_offset)[0] == segments[1].start_offset
        assert cache.misses == 2 and len(cache) == 2
        names = sorted(p.name for p in (tmp_path / "logs" / "remote-log-index-cache").iterdir())
        assert names[:3] == [f"0_{first.remote_log_segment_id.id}{s}"
                             for s in (".index", ".timeindex", ".txnindex")]
    finally:
        t.close()
