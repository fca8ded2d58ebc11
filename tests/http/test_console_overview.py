"""The console's overview as an operator's first screen: topics with their bytes in and out
per second, the throughput chart's samples (a bounded ring), groups with lag, the cluster."""

from __future__ import annotations

import re

import confluent_kafka
from http_support import HTTP, get

from tidelog.http.throughput import MIN_GAP_MS, RATE_WINDOW_MS, ThroughputHistory
from tidelog.testing import EmbeddedBroker

T0 = 1_700_000_000_000


def _produce(eb: EmbeddedBroker, topic: str, n: int, size: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"v" * size, key=b"%d" % i)
    assert p.flush(30) == 0


def _stats_bytes_in(eb: EmbeddedBroker, topic: str | None = None) -> int:
    async def read() -> int:
        stats = eb.broker.replica_manager.topic_stats
        return int((stats.all_topics if topic is None else stats.topic(topic)).bytes_in)

    return int(eb.run(read()))


def test_rates_come_from_the_broker_counters_between_samples() -> None:
    with EmbeddedBroker() as eb:
        history = ThroughputHistory(eb.broker, interval_ms=1000)
        _produce(eb, "a", 10, 100)
        eb.run(_sample(history, T0))
        before, before_all = _stats_bytes_in(eb, "a"), _stats_bytes_in(eb)
        _produce(eb, "a", 50, 1000)
        _produce(eb, "b", 5, 100)
        eb.run(_sample(history, T0 + 2000))
        grown, grown_all = _stats_bytes_in(eb, "a") - before, _stats_bytes_in(eb) - before_all
        assert grown > 50 * 1000 and grown_all > grown
        series = history.series()
        assert series["bytes in/s"] == [(T0 + 2000, grown_all // 2)]  # per second over 2 s
        assert series["bytes out/s"] == [(T0 + 2000, 0)]  # nothing fetched
        rates = history.topic_rates()
        assert rates["a"][0] == grown / 2 and rates["b"][0] == (grown_all - grown) / 2


def test_the_rings_are_bounded() -> None:
    with EmbeddedBroker() as eb:
        history = ThroughputHistory(eb.broker, interval_ms=1000, history_ms=60_000)
        for i in range(500):  # 500 s of samples, one a second
            eb.run(_sample(history, T0 + i * 1000))
        assert len(history.totals) <= 62 and history.totals[-1].time_ms == T0 + 499_000
        assert history.totals[0].time_ms >= T0 + 499_000 - 60_000
        assert len(history.recent) <= RATE_WINDOW_MS // 1000 + 2


def test_a_sample_soon_after_the_first_keeps_the_first_as_the_rates_base() -> None:
    """Samples closer than MIN_GAP_MS replace the newest, never the only one: a page loaded
    right after a sample still has a rate (it had none when the first sample was replaced)."""
    with EmbeddedBroker() as eb:
        history = ThroughputHistory(eb.broker, interval_ms=1000)
        eb.run(_sample(history, T0))
        _produce(eb, "a", 10, 100)
        eb.run(_sample(history, T0 + MIN_GAP_MS // 2))
        assert [s.time_ms for s in history.recent] == [T0, T0 + MIN_GAP_MS // 2]
        assert history.topic_rates()["a"][0] == _stats_bytes_in(eb, "a") * 1000 / (MIN_GAP_MS // 2)
        eb.run(_sample(history, T0 + MIN_GAP_MS // 2 + 1))  # the newest is replaced
        assert [s.time_ms for s in history.recent] == [T0, T0 + MIN_GAP_MS // 2 + 1]


def test_the_first_page_shows_the_rates_since_the_listener_started() -> None:
    """The listener samples as it starts: a page loaded before the sampler's first interval
    (here an hour) shows the bytes produced since the start."""
    with EmbeddedBroker({**HTTP, "http.console.lag.sample.interval.ms": "3600000"}) as eb:
        _produce(eb, "orders", 20, 500)
        status, html = get(eb.http_url + "/")
        assert status == 200
        (orders,) = [r for r in _table(html, "overview-topics") if r[0] == "orders"]
        assert orders[3] != "0 B"


async def _sample(history: ThroughputHistory, now_ms: int) -> None:
    history.sample(now_ms)


def test_the_overview_lists_topics_rates_groups_and_the_cluster() -> None:
    config = {**HTTP, "http.console.lag.sample.interval.ms": "100",
              "group.initial.rebalance.delay.ms": "0"}  # fmt: skip
    with EmbeddedBroker(config) as eb:
        _produce(eb, "orders", 200, 500)
        c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                      "group.id": "billing", "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["orders"])
            got = 0
            while got < 50:
                msg = c.poll(10)
                assert msg is not None
                got += msg.error() is None
            c.commit(asynchronous=False)
        finally:
            c.close()
        _produce(eb, "orders", 20, 500)  # the overview samples on each load: a rate shows
        status, html = get(eb.http_url + "/")
        assert status == 200
        topics = _table(html, "overview-topics")
        (orders,) = [r for r in topics if r[0] == "orders"]
        assert orders[1] == "1" and orders[3] != "0 B"  # bytes in/s over the recent samples
        groups = _table(html, "overview-groups")
        (billing,) = [r for r in groups if r[0] == "billing"]
        assert int(billing[3]) > 0  # lag: 220 records, at most the consumed ones committed
        cluster = dict(r[:2] for r in _table(html, "overview-cluster"))
        assert cluster["brokers"] == str(eb.broker.node_id)
        assert cluster["offline partitions"] == "0"
        assert 'id="throughput-chart"' in html


def _table(html: str, table_id: str) -> list[list[str]]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                        row, flags=re.S)]
        if cells:
            rows.append(cells)
    return rows
