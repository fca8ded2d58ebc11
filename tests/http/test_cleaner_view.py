"""The cleaner as /metrics and the console show it, after a real clean of a compacted topic."""

from __future__ import annotations

import re

import confluent_kafka
from http_support import HTTP, get, sample, scrape, wait_for

from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition


def test_a_clean_shows_in_metrics_the_cleaner_page_and_the_segment_picture(tmp_path):
    config = {**HTTP, "log.cleaner.backoff.ms": "3600000"}  # only our clean_once runs
    with EmbeddedBroker(config, log_dir=tmp_path) as eb:
        import confluent_kafka.admin as ka

        admin = ka.AdminClient({"bootstrap.servers": eb.bootstrap_servers})
        topic = ka.NewTopic("compacted", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"})  # fmt: skip
        admin.create_topics([topic])["compacted"].result(30)
        errors: list[object] = []
        p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers,
                                      "batch.size": 2000})  # fmt: skip
        for i in range(200):
            p.produce("compacted", key=b"k%d" % (i % 10), value=b"v" * 50,
                      on_delivery=lambda e, _m: errors.append(e))  # fmt: skip
        assert p.flush(30) == 0 and errors == [None] * 200
        tp = TopicPartition("compacted", 0)

        async def clean() -> int:
            logs = eb.broker.replica_manager.logs
            logs.get_log(tp).roll()
            logs.cleaner.clean_once()
            return int(logs.cleaner.manager.all_cleaner_checkpoints().get(tp, 0))

        point = wait_for(lambda: eb.run(clean()), "a cleaner checkpoint")
        assert point == 200
        s = scrape(eb.http_url)
        assert sample(s, "kafka_log_logcleaner_max_clean_time_secs") > 0
        assert 0 < sample(s, "kafka_log_logcleaner_max_buffer_utilization_percent") <= 100
        assert 0 < sample(s, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
        assert sample(s, "kafka_log_logcleanermanager_max_dirty_percent") > 0
        _, page = get(eb.http_url + "/cleaner")
        assert "compacted-0" in page and re.search(r"\d+ → \d+ B in \d+\.\d{3} s", page)
        # cleaner point 200 and, cleaned up to the active segment, nothing dirty
        assert '<td class="num">200</td><td class="num">0.0 %</td>' in page
        assert "__consumer_offsets" not in page  # empty compacted partitions are counted only
        _, picture = get(eb.http_url + "/topics/compacted/0")
        assert 'data-mark="cleaner point" data-offset="200"' in picture
