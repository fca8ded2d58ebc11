"""The console in a real headless Chromium (Debian's chromium + chromedriver, driven by
Selenium): every page loads without a console error, the segment picture counts the
segments after a roll, the lag chart rises once a consumer stops. Screenshots of each page
go to ``$TIDELOG_SCREENSHOT_DIR`` when set, else to the test's tmp dir."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest
from http_support import HTTP, wait_for

from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_capability
from tidelog.util.topic_partition import TopicPartition

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1280,1000"]  # fmt: skip


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("TIDELOG_SCREENSHOT_DIR") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def browser(tmp_path: Path):
    # a capability: skipped without the browser here, a failure under CI (.ci/run installs it)
    require_capability("chromium", os.path.exists(CHROMIUM) and os.path.exists(DRIVER),
                       "needs Debian's chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def visit(driver, url: str, shot: Path) -> None:
    """Load ``url``, save a screenshot, and fail on any console error or warning."""
    driver.get(url)
    assert driver.execute_script("return document.readyState") == "complete"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    problems = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == [], (url, problems)


def _produce(eb: EmbeddedBroker, topic: str, values: list[bytes], **config: object) -> None:
    """Produce and check every delivery report (``flush`` alone counts only unsent ones)."""
    errors: list[object] = []
    p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers, **config})
    for i, v in enumerate(values):
        p.produce(topic, key=b"key-%d" % (i % 7), value=v,
                  on_delivery=lambda err, _m: errors.append(err))  # fmt: skip
    assert p.flush(30) == 0
    assert errors == [None] * len(values)


def _segments(eb: EmbeddedBroker, tp: TopicPartition) -> int:
    async def count() -> int:
        return int(eb.broker.replica_manager.get_log(tp).number_of_segments())

    return int(eb.run(count()))


def test_every_page_loads_clean_and_the_segment_picture_follows_rolls(browser, shots):
    from selenium.webdriver.common.by import By

    config = {**HTTP, "log.cleaner.backoff.ms": "100"}
    with EmbeddedBroker(config) as eb:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": eb.bootstrap_servers})
        topic = confluent_kafka.admin.NewTopic("rolled", 1, 1, config={"segment.bytes": "2048"})
        admin.create_topics([topic])["rolled"].result(30)
        # batches under segment.bytes (a larger one is RECORD_LIST_TOO_LARGE, as in Kafka)
        _produce(eb, "rolled", [b"x" * 100] * 60, **{"batch.size": 1000})
        c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                      "group.id": "viewers", "enable.auto.commit": False})  # fmt: skip
        c.assign([confluent_kafka.TopicPartition("rolled", 0, 0)])
        for _ in range(10):
            assert c.poll(10) is not None
        c.commit(asynchronous=False)
        c.close()
        base = eb.http_url
        pages = {"overview": "/", "topics": "/topics", "topic": "/topics/rolled",
                 "partition": "/topics/rolled/0", "messages": "/topics/rolled/0/messages",
                 "groups": "/groups", "group": "/groups/viewers", "cleaner": "/cleaner"}  # fmt: skip
        for name, path in pages.items():
            visit(browser, base + path, shots / f"{name}.png")

        tp = TopicPartition("rolled", 0)
        expected = _segments(eb, tp)
        assert expected > 1  # 60 x ~170 bytes over 2 KiB segments
        visit(browser, base + "/topics/rolled/0", shots / "partition-before-roll.png")
        drawn = browser.find_elements(By.CSS_SELECTOR, "#segments g.segment")
        assert len(drawn) == expected
        assert len(browser.find_elements(By.CSS_SELECTOR, "#segments g.segment.active")) == 1

        async def roll() -> None:
            eb.broker.replica_manager.get_log(tp).roll()

        eb.run(roll())
        assert _segments(eb, tp) == expected + 1
        visit(browser, base + "/topics/rolled/0", shots / "partition-after-roll.png")
        drawn = browser.find_elements(By.CSS_SELECTOR, "#segments g.segment")
        assert len(drawn) == expected + 1
        bases = [int(g.get_attribute("data-base-offset")) for g in drawn]
        assert bases == sorted(bases) and bases[-1] == 60  # the new, empty active segment
        marks = {g.get_attribute("data-mark"): int(g.get_attribute("data-offset"))
                 for g in browser.find_elements(By.CSS_SELECTOR, "#segments g.mark")}  # fmt: skip
        assert marks["LEO"] == 60 and marks["HW"] == 60 and marks["log start"] == 0


def test_lag_chart_rises_when_the_consumer_stops(browser, shots):
    from selenium.webdriver.common.by import By

    config = {**HTTP, "http.console.lag.sample.interval.ms": "100",
              "group.initial.rebalance.delay.ms": "0"}  # fmt: skip
    with EmbeddedBroker(config) as eb:
        _produce(eb, "lagging", [b"%d" % i for i in range(20)])
        c = confluent_kafka.Consumer({
            "bootstrap.servers": eb.bootstrap_servers, "group.id": "lagging-readers",
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
            "auto.commit.interval.ms": 100,
        })  # fmt: skip
        c.subscribe(["lagging"])
        seen = 0

        def caught_up() -> bool:
            nonlocal seen
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen += 1
            lag = eb.run(_group_lag(eb, "lagging-readers"))
            return seen >= 20 and lag == 0

        wait_for(caught_up, "the consumer to catch up and commit", timeout=60)
        url = eb.http_url + "/groups/lagging-readers"
        visit(browser, url, shots / "group-caught-up.png")
        assert _points(browser, By)[-1] == 0
        members = browser.find_element(By.ID, "members").text
        assert "lagging: 0" in members  # the member's decoded assignment
        assert browser.find_element(By.ID, "group-state").text == "Stable"
        c.close()  # the consumer stops; the producer goes on
        _produce(eb, "lagging", [b"late-%d" % i for i in range(35)])
        wait_for(lambda: eb.run(_group_lag(eb, "lagging-readers")) == 35, "lag of 35")
        visit(browser, url, shots / "group-lagging.png")
        points = _points(browser, By)
        assert points[-1] == 35 and min(points) == 0 and len(points) >= 2
        lag_cells = browser.find_elements(By.CSS_SELECTOR, "#lag td.num")
        assert "35" in [td.text for td in lag_cells]


async def _group_lag(eb: EmbeddedBroker, group: str) -> int:
    from tidelog.http import state

    return sum(pl.lag for pl in state.group_lags(eb.broker, group))


def _points(browser, by) -> list[int]:
    circles = browser.find_elements(by.CSS_SELECTOR, "#lag-chart g.series.total circle.point")
    return [int(c.get_attribute("data-lag")) for c in circles]


FS_BACKEND = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"


def test_topic_view_shows_local_and_remote_size_of_a_tiered_topic(browser, shots, tmp_path):
    from selenium.webdriver.common.by import By

    remote = tmp_path / "remote"
    remote.mkdir()
    config = {**HTTP, "remote.log.storage.system.enable": "true",
              "remote.log.storage.manager.class.name":
                  "io.aiven.kafka.tieredstorage.RemoteStorageManager",
              "rsm.config.storage.backend.class": FS_BACKEND,
              "rsm.config.storage.root": str(remote),
              "remote.log.manager.task.interval.ms": "100",
              "log.retention.check.interval.ms": "100", "log.initial.task.delay.ms": "0",
              "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
              "rlmm.config.remote.log.metadata.topic.replication.factor": "1"}
    with EmbeddedBroker(config) as eb:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": eb.bootstrap_servers})
        topics = [confluent_kafka.admin.NewTopic("tiered", 2, 1, config={
                      "remote.storage.enable": "true", "segment.bytes": "2048",
                      "retention.ms": "-1", "local.retention.bytes": "1"}),
                  confluent_kafka.admin.NewTopic("plain", 1, 1)]
        for f in admin.create_topics(topics).values():
            f.result(30)
        p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers,
                                      "batch.size": 1000})
        for _ in range(60):
            p.produce("tiered", value=b"x" * 100, partition=0)
        assert p.flush(30) == 0
        tp = TopicPartition("tiered", 0)

        def remote_log_bytes() -> int:  # what the directory holds, read independently
            return sum(f.stat().st_size for f in remote.rglob("*.log"))

        async def state() -> tuple[int, int | None, int]:
            lg = eb.broker.replica_manager.get_log(tp)
            return (int(lg.number_of_segments()),
                    eb.broker.remote_log_manager.remote_log_size_bytes(tp),
                    int(lg.size_in_bytes))

        # every closed segment copied and deleted locally: the active one alone is local
        wait_for(lambda: (s := eb.run(state()))[0] == 1 and s[1] == remote_log_bytes() > 0,
                 "partition 0 tiered", timeout=60)
        _, remote_size, local_size = eb.run(state())
        visit(browser, eb.http_url + "/topics/tiered", shots / "topic-tiered.png")
        rows = browser.find_elements(By.CSS_SELECTOR, "#partitions tr")[1:]
        cells = [(r.find_element(By.CSS_SELECTOR, ".local-size").get_attribute("data-bytes"),
                  r.find_element(By.CSS_SELECTOR, ".remote-size").get_attribute("data-bytes"))
                 for r in rows]
        assert cells == [(str(local_size), str(remote_size)), ("0", "0")]
        assert remote_size > 6000 > local_size  # 60 x ~170 bytes: most of it in remote storage
        visit(browser, eb.http_url + "/topics/plain", shots / "topic-plain.png")
        plain = browser.find_element(By.CSS_SELECTOR, "#partitions .remote-size")
        assert plain.text == "-" and plain.get_attribute("data-bytes") == ""
