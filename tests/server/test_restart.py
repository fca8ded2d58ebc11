"""Topics, topic ids, configs, data, producer ids and log start offsets survive a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker_wire import Wire, fetch_body, produce_body

from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker


def _meta(w: Wire) -> dict[str, Any]:
    resp: Any = w.call(
        3,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {t.name: (t.topic_id, len(t.partitions)) for t in resp.topics}


def test_state_survives_restart(tmp_path: Path) -> None:
    batch = build_batch([(1_700_000_000_000 + i, None, f"v{i}".encode()) for i in range(10)])
    with EmbeddedBroker(log_dir=tmp_path) as b:
        rm = b.broker.replica_manager
        b.run(_call(lambda: rm.create_topic("keep", 3, {"retention.ms": "123456"})))
        b.run(_call(lambda: rm.create_partitions("keep", 4)))
        b.run(_call(lambda: rm.create_topic("gone", 1)))
        b.run(_call(lambda: rm.delete_topic("gone")))
        with Wire(b) as w:
            w.call(0, 9, body=produce_body(9, "keep", {1: batch}))
            before = _meta(w)
            pid_before: Any = w.call(22, 4, transactional_id=None, transaction_timeout=1000)
        b.run(_call(lambda: rm.delete_records(_tp("keep", 1), 4)))
    assert not (tmp_path / "gone-0").exists()
    with EmbeddedBroker(log_dir=tmp_path) as b:
        rm = b.broker.replica_manager
        with Wire(b) as w:
            after = _meta(w)
            resp: Any = w.call(1, 12, body=fetch_body(12, "keep", {1: 4}))
            pid_after: Any = w.call(22, 4, transactional_id=None, transaction_timeout=1000)
        assert rm.topic("keep").configs == {"retention.ms": "123456"}
        assert rm.topic_config("keep").retention_ms == 123456
    assert after == before and set(after) == {"keep"} and after["keep"][1] == 4
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (0, 10, 4)
    assert pid_after.producer_id > pid_before.producer_id


def _tp(topic: str, partition: int) -> Any:
    from tidelog.util.topic_partition import TopicPartition

    return TopicPartition(topic, partition)


async def _call(fn: Any) -> Any:
    return fn()


def test_idempotent_retry_after_restart_is_deduplicated(tmp_path: Path) -> None:
    """Producer state is rebuilt at load (snapshot + log): a retry of an acknowledged batch
    sent after the restart gets its original offset back and appends nothing."""
    import time

    now = int(time.time() * 1000)  # producer state expires by batch timestamps: use real ones
    with EmbeddedBroker(log_dir=tmp_path) as b, Wire(b) as w:
        init: Any = w.call(
            22,
            4,
            transactional_id=None,
            transaction_timeout=1000,
            producer_id=-1,
            producer_epoch=-1,
        )
        pid, epoch = init.producer_id, init.producer_epoch
        b0 = build_batch(
            [(now, None, b"a"), (now, None, b"b")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
        )
        b1 = build_batch(
            [(now, None, b"c")], producer_id=pid, producer_epoch=epoch, base_sequence=2
        )
        for batch in (b0, b1):
            resp: Any = w.call(0, 9, body=produce_body(9, "idem-restart", {0: batch}, acks=-1))
            assert resp.responses[0].partition_responses[0].error_code == 0
    with EmbeddedBroker(log_dir=tmp_path) as b, Wire(b) as w:
        retry: Any = w.call(0, 9, body=produce_body(9, "idem-restart", {0: b1}, acks=-1))
        p = retry.responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 2)
        nxt = build_batch(
            [(now, None, b"d")], producer_id=pid, producer_epoch=epoch, base_sequence=3
        )
        resp = w.call(0, 9, body=produce_body(9, "idem-restart", {0: nxt}, acks=-1))
        assert resp.responses[0].partition_responses[0].base_offset == 3
        fetched: Any = w.call(1, 12, body=fetch_body(12, "idem-restart", {0: 0}))
        assert fetched.responses[0].partitions[0].high_watermark == 4


def test_cluster_id_mismatch_refuses_to_start(tmp_path: Path) -> None:
    import pytest

    from tidelog.server.metadata.local_store import MetadataStoreError

    with EmbeddedBroker(log_dir=tmp_path) as b:
        cluster_id = b.broker.replica_manager.cluster_id
    with EmbeddedBroker({"cluster.id": cluster_id}, log_dir=tmp_path) as b:
        assert b.broker.replica_manager.cluster_id == cluster_id
    with pytest.raises(MetadataStoreError, match=r"Invalid cluster\.id in .*meta\.properties"):
        EmbeddedBroker({"cluster.id": "another"}, log_dir=tmp_path).start()


def test_corrupt_metadata_file_names_the_file(tmp_path: Path) -> None:
    import pytest

    from tidelog.server.metadata.local_store import METADATA_FILE, MetadataStoreError

    with EmbeddedBroker(log_dir=tmp_path):
        pass
    (tmp_path / METADATA_FILE).write_text("{not json")
    with pytest.raises(MetadataStoreError, match=METADATA_FILE):
        EmbeddedBroker(log_dir=tmp_path).start()


def test_failed_start_releases_the_log_dir(tmp_path: Path) -> None:
    import pytest

    from tidelog.server.metadata.local_store import METADATA_FILE, MetadataStoreError

    with EmbeddedBroker(log_dir=tmp_path):
        pass
    good = (tmp_path / METADATA_FILE).read_bytes()
    (tmp_path / METADATA_FILE).write_text("{not json")
    with pytest.raises(MetadataStoreError):
        EmbeddedBroker(log_dir=tmp_path).start()
    (tmp_path / METADATA_FILE).write_bytes(good)
    with EmbeddedBroker(log_dir=tmp_path) as b:  # the dir lock was released
        assert b.port > 0


def test_partition_metadata_files_name_the_topic_id(tmp_path: Path) -> None:
    import base64

    with EmbeddedBroker(log_dir=tmp_path) as b:
        rm = b.broker.replica_manager
        b.run(_call(lambda: rm.create_topic("pm", 2)))
        topic_id = rm.topic("pm").topic_id
    expected = (
        f"version: 0\ntopic_id: {base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}\n"
    )
    for p in (0, 1):
        assert (tmp_path / f"pm-{p}" / "partition.metadata").read_text() == expected
    (tmp_path / "pm-1" / "partition.metadata").unlink()
    with EmbeddedBroker(log_dir=tmp_path):  # rewritten when the log loads
        pass
    assert (tmp_path / "pm-1" / "partition.metadata").read_text() == expected
