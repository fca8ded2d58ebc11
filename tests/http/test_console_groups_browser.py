"""The console's groups pages in a real headless Chromium for the three kinds of group: the
list shows each group's type and state, a KIP-848 group's page its members' assignments, a
share group's page the share-partition's in-flight records and acquisition lock held by a
confluent-kafka ShareConsumer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from http_support import HTTP, wait_for
from test_console_browser import browser, shots, visit  # noqa: F401 (fixtures)

from tidelog.testing import EmbeddedBroker

TOPIC = "queued"


def _rows(driver: Any, table_id: str) -> dict[str, list[str]]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tr")[1:]
    cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    return {c[0]: c for c in cells}


def test_groups_pages_show_types_assignments_and_share_partitions(
        browser: Any, shots: Path) -> None:  # noqa: F811
    with EmbeddedBroker({**HTTP, "offsets.topic.num.partitions": "3",
                         "group.share.heartbeat.interval.ms": "250",
                         "group.consumer.heartbeat.interval.ms": "250"}) as eb:
        admin = AdminClient({"bootstrap.servers": eb.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                             "group.id": "kip848-view",
                                             "group.protocol": "consumer"})
        consumer.subscribe([TOPIC])
        share = ShareConsumer({"bootstrap.servers": eb.bootstrap_servers,
                               "group.id": "share-view", "share.acknowledgement.mode": "explicit"})
        share.subscribe([TOPIC])
        coord = eb.broker.group_coordinator

        def joined() -> bool:
            consumer.poll(0.05)
            share.poll(0.05)
            g = coord.consumer.groups.get("kip848-view")
            return bool(g is not None and g.state().value == "Stable"
                        and "share-view" in coord.share.groups and coord.share.partitions)

        wait_for(joined, "both groups to form", timeout=60)
        p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers})
        for i in range(4):
            p.produce(TOPIC, b"job-%d" % i, partition=1)
        assert p.flush(10) == 0
        held: list[Any] = []
        deadline = time.monotonic() + 30
        while len(held) < 4 and time.monotonic() < deadline:
            consumer.poll(0.05)
            held += [m for m in share.poll(0.1) if m.partition() == 1]
        assert len(held) == 4
        share.acknowledge(held[2], AcknowledgeType.ACCEPT)
        share.acknowledge(held[3], AcknowledgeType.REJECT)
        share.commit_sync(10)
        try:
            base = eb.http.urls[0]
            visit(browser, base + "/groups", shots / "groups-all-types.png")
            groups = _rows(browser, "groups")
            assert groups["kip848-view"][1] == "Stable" and groups["kip848-view"][5] == "consumer"
            assert groups["share-view"][1] == "Stable" and groups["share-view"][5] == "share"
            assert groups["share-view"][6] == "2"  # two records still held

            visit(browser, base + "/groups/kip848-view", shots / "group-consumer.png")
            [member] = _rows(browser, "members").values()
            assert member[3] == f"{TOPIC}: 0, 1" and member[4] == "2"

            visit(browser, base + "/groups/share-view", shots / "group-share.png")
            from selenium.webdriver.common.by import By

            assert browser.find_element(By.ID, "group-type").text == "share"
            parts = _rows(browser, "share-partitions")
            row = parts[f"{TOPIC}-1"]
            # the first two still held keep SPSO at 0; then one accepted, one archived
            assert row[1:8] == ["0", "4", "2", "2", "0", "1", "1"]
            assert row[8].endswith("of 30.0 s")
            assert float(row[8].split()[0]) >= 0
        finally:
            share.close()
            consumer.close()
