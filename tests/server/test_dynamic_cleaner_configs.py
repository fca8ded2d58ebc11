"""Dynamic log cleaner configs (Kafka's LogCleaner.reconfigure) through confluent-kafka's
AdminClient incremental_alter_configs on the BROKER resource: log.cleaner.threads resizes the
running cleaner pool, log.cleaner.io.max.bytes.per.second retargets the I/O throttle,
log.cleaner.dedupe.buffer.size sizes the new cleaners' offset maps; Kafka's half/double
thread-count bounds are refused; every change is described as DYNAMIC_BROKER_CONFIG and
survives a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tidelog.storage.cleaner.offset_map import BYTES_PER_ENTRY
from tidelog.testing import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
adm = pytest.importorskip("confluent_kafka.admin")

MIB = 1 << 20


def _set(a: Any, node: str, **configs: str) -> None:
    res = adm.ConfigResource(adm.ResourceType.BROKER, node, incremental_configs=[
        adm.ConfigEntry(name.replace("_", "."), value,
                        incremental_operation=adm.AlterConfigOpType.SET)
        for name, value in configs.items()])
    a.incremental_alter_configs([res])[res].result(timeout=30)


def _describe(a: Any, node: str, name: str) -> Any:
    res = adm.ConfigResource(adm.ResourceType.BROKER, node)
    return a.describe_configs([res])[res].result(timeout=30)[name]


def _cleaner(b: EmbeddedBroker) -> Any:
    return b.broker.replica_manager.logs.cleaner


def _running_threads(b: EmbeddedBroker) -> int:
    return sum(1 for t in _cleaner(b)._threads if t.is_alive())


def _wait_threads(b: EmbeddedBroker, n: int) -> None:
    deadline = time.monotonic() + 20
    while _running_threads(b) != n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running_threads(b) == n


def test_cleaner_configs_apply_live_and_persist(tmp_path: Path) -> None:
    props = {"log.dirs": str(tmp_path), "log.cleaner.dedupe.buffer.size": str(4 * MIB)}
    with EmbeddedBroker(props) as b:
        node = str(b.broker.node_id)
        a = adm.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        _wait_threads(b, 1)
        _set(a, node, log_cleaner_threads="2",
             **{"log.cleaner.io.max.bytes.per.second": "1000000",
                "log.cleaner.dedupe.buffer.size": str(8 * MIB)})
        _wait_threads(b, 2)
        cleaner = _cleaner(b)
        assert cleaner.throttler._rate() == 1_000_000.0
        # each of the two threads' next cleaning gets half of the new 8 MiB
        assert [c.offset_map.slots for c in cleaner.cleaners] == [4 * MIB // BYTES_PER_ENTRY] * 2
        entry = _describe(a, node, "log.cleaner.threads")
        assert (entry.value, entry.source) == (
            "2", adm.ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert entry.is_read_only is False
        # Kafka's validateReconfiguration: no more than double, no less than half, at least 1
        for bad in ("5", "0"):
            with pytest.raises(ck.KafkaException) as info:
                _set(a, node, log_cleaner_threads=bad)
            assert info.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
        _wait_threads(b, 2)  # a refused change leaves the pool as it was
        _set(a, node, log_cleaner_threads="4")
        _wait_threads(b, 4)
        b.restart()
        _wait_threads(b, 4)
        cleaner = _cleaner(b)
        assert cleaner.config.max_io_bytes_per_second == 1_000_000.0
        assert cleaner.config.dedupe_buffer_size == 8 * MIB
        a = adm.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert _describe(a, node, "log.cleaner.threads").value == "4"
        static = _describe(a, node, "log.cleaner.backoff.ms")
        assert (static.value, static.source) == ("15000", adm.ConfigSource.DEFAULT_CONFIG.value)


def test_reconfigure_later_applies_the_newest_config_off_the_caller(tmp_path: Path) -> None:
    from tidelog.storage.cleaner import CleanerConfig, LogCleaner

    def cfg(threads: int, rate: float) -> CleanerConfig:
        return CleanerConfig(num_threads=threads, dedupe_buffer_size=MIB, backoff_ms=10,
                             max_io_bytes_per_second=rate)

    lc = LogCleaner(cfg(1, 1e9), [tmp_path], lambda: {})
    lc.startup()
    try:
        with lc._lifecycle:  # a restart in progress: both requests wait behind it
            first = lc.reconfigure_later(cfg(2, 5.0))
            second = lc.reconfigure_later(cfg(2, 7.0))
            assert lc.throttler._rate() == 7.0  # the throttle follows at once
            assert lc.config.num_threads == 1  # the threads not yet
        first.join(20)
        second.join(20)
        assert lc.config == cfg(2, 7.0)
        assert len(lc.cleaners) == 2
        assert sum(1 for t in lc._threads if t.is_alive()) == 2
    finally:
        lc.shutdown()
    assert lc._threads == []
