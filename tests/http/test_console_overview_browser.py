"""The overview in a real headless Chromium under a running load: producers on two topics and
a consumer group that fell behind. The throughput chart fills with non-zero points, the topics
table shows bytes in per second, the group shows its lag; a screenshot is saved (see
test_console_browser for where)."""

from __future__ import annotations

import threading

import confluent_kafka
from http_support import HTTP, wait_for
from test_console_browser import browser, shots, visit  # the shared Chromium fixtures

from tidelog.testing import EmbeddedBroker, FaultPlan

__all__ = ["browser", "shots"]


def _load(eb: EmbeddedBroker, stop: threading.Event) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers, "linger.ms": 20})
    i = 0
    while not stop.is_set():
        for topic in ("orders", "clicks"):
            try:
                p.produce(topic, b"x" * (400 if topic == "orders" else 100), key=b"%d" % i)
            except BufferError:
                p.poll(0.05)
        i += 1
        p.poll(0.002)
    assert p.flush(30) == 0


def _chart_points(driver, By, series: str) -> list[int]:  # type: ignore[no-untyped-def]
    css = f'#throughput-chart g[data-series="{series}"] circle'
    return [int(c.get_attribute("data-lag")) for c in driver.find_elements(By.CSS_SELECTOR, css)]


def test_the_overview_under_load(browser, shots):  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    config = {**HTTP, "http.console.lag.sample.interval.ms": "200",
              "group.initial.rebalance.delay.ms": "0"}  # fmt: skip
    browser.set_window_size(1280, 1700)  # the whole overview in the screenshot
    with EmbeddedBroker(config) as eb:
        stop = threading.Event()
        loader = threading.Thread(target=_load, args=(eb, stop))
        loader.start()
        try:
            c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                          "group.id": "dashboard",
                                          "auto.offset.reset": "earliest"})  # fmt: skip
            c.subscribe(["orders"])
            wait_for(lambda: (m := c.poll(1)) is not None and m.error() is None, "a record")
            c.commit(asynchronous=False)
            c.close()  # the group falls behind while the load goes on

            def busy_chart() -> bool:
                visit(browser, eb.http_url + "/", shots / "overview-under-load.png")
                return sum(1 for v in _chart_points(browser, By, "bytes in/s") if v > 0) >= 10

            wait_for(busy_chart, "ten non-zero throughput samples", timeout=60)
        finally:
            stop.set()
            loader.join(60)
        rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r
                for r in browser.find_elements(By.CSS_SELECTOR, "#overview-topics tr")[1:]}  # fmt: skip
        assert set(rows) >= {"orders", "clicks"}
        for name in ("orders", "clicks"):
            assert rows[name].find_elements(By.TAG_NAME, "td")[3].text != "0 B"  # bytes in/s
        groups = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")
                  for r in browser.find_elements(By.CSS_SELECTOR, "#overview-groups tr")[1:]}  # fmt: skip
        assert int(groups["dashboard"][3].text) > 0  # its lag
        assert browser.find_element(By.ID, "bytes-in-rate").text != "0 B"


def test_a_degraded_dir_shows_a_banner_on_the_overview(browser, shots):  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    plan = FaultPlan()
    with EmbeddedBroker({**HTTP, "log.dir.min.free.bytes": str(64 << 20)}, fault_plan=plan) as eb:
        plan.fill_log_dir(eb.log_dir, free_bytes=10 << 20)
        eb.broker.replica_manager.logs.free_space.measure_all()  # what the periodic task does
        visit(browser, eb.http_url + "/", shots / "overview-degraded.png")
        banner = browser.find_element(By.ID, "degraded-banner").text
        assert "10.0 MiB free" in banner and "floor 64.0 MiB" in banner
        cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#log-dirs td")]
        assert "below the free-space floor: writes refused" in cells
