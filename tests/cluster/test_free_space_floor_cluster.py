"""The free-space floor in a cluster: a leader whose log dir falls below
``log.dir.min.free.bytes`` gives its leadership and ISR place to replicas with space, as a
failed dir does (server/free_space_replication.py), and takes them back once freed.

Three broker processes, each on its own 64 MiB tmpfs log dir with a 16 MiB floor (root: a
mount; skipped with the reason elsewhere, a failure under CI). An idempotent acks=all producer
writes unique values to a topic with replication factor 3 and min.insync.replicas=2 throughout.
The leader's dir is filled to below its floor (still above the coordinators' reserve, nowhere
near ENOSPC): the controller moves the leadership to an in-sync replica, the full broker stays
up, leaves the ISR and is listed as an offline replica, and acks=all writes resume on the new
leader. Freed, the dir's replica fetches again and rejoins the ISR. At the end a consumer reads
every acknowledged value exactly once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import create_topic, states, wait_for

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.testing import EmbeddedCluster
from tidelog.testing.capability import require_root
from tidelog.testing.zookeeper import ZooKeeperServer

MiB = 1 << 20
DIR_BYTES = 64 * MiB
FLOOR = 16 * MiB
TOPIC = "floor"
FILLER = "filler"
CONFIG = {
    "log.dir.min.free.bytes": str(FLOOR), "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "10000",
    "replica.fetch.backoff.ms": "200",
}  # fmt: skip


class TmpfsCluster(EmbeddedCluster):
    """Each broker's log dir a tmpfs of DIR_BYTES, mounted before it starts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mounts: list[Path] = []

    def broker_props(self, broker_id: int) -> dict[str, str]:
        props = super().broker_props(broker_id)
        d = Path(props["log.dirs"])
        if d not in self.mounts:
            d.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DIR_BYTES}", "tmpfs", str(d)],
                           check=True, capture_output=True, timeout=30)  # fmt: skip
            self.mounts.append(d)
        return props

    def log_dir(self, broker_id: int) -> Path:
        assert self.directory is not None
        return self.directory / f"broker-{broker_id}"

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()
        for d in self.mounts:
            subprocess.run(["umount", "-l", str(d)], capture_output=True, timeout=30)
        self.mounts.clear()
        super().stop()


class Writer:
    """One idempotent acks=all producer sending unique values until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(bootstrap,))

    def _report(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(str(err))

    def _run(self, bootstrap: str) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120_000,
                      "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
        seq = 0
        while not self.stop.is_set():
            try:
                p.produce(TOPIC, f"v-{seq:08d}".encode(), partition=0, on_delivery=self._report)
                seq += 1
            except BufferError:
                pass
            p.poll(0.002)
        assert p.flush(120) == 0

    def acked_count(self) -> int:
        return len(self.acked)


def _fill_below_floor(directory: Path) -> None:
    """A file leaving 3/4 of the floor free: below it, above the coordinators' half."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    with open(directory / FILLER, "wb") as f:
        f.truncate(0)
        chunk = b"\0" * MiB
        left = free - FLOOR * 3 // 4
        while left > 0:
            left -= f.write(chunk[: min(len(chunk), left)])
        f.flush()
        os.fsync(f.fileno())


def _offline_replicas(cluster: EmbeddedCluster, broker: int) -> list[int]:
    """The partition's offline replicas in one broker's Metadata (v9)."""

    async def ask() -> Any:
        conn = await AsyncBrokerConnection.connect("127.0.0.1", cluster.brokers[broker].port, client_id="t",
                                                   api_ranges={3: (9, 9), 18: (0, 3)})  # fmt: skip
        try:
            return await conn.request(3, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
        finally:
            await conn.close()

    return list(asyncio.run(ask()).topics[0].partitions[0].offline_replicas)


def _read_all(cluster: EmbeddedCluster) -> list[bytes]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"check-{uuid.uuid4()}",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([KafkaTopicPartition(TOPIC, 0, 0)])
        _, high = c.get_watermark_offsets(KafkaTopicPartition(TOPIC, 0), timeout=30)
        out: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(out) < high and time.monotonic() < deadline:
            out += [m.value() or b"" for m in c.consume(1000, timeout=1) if m.error() is None]
        return out
    finally:
        c.close()


def test_a_leader_below_its_floor_hands_over_and_rejoins_when_freed(
    zookeeper_server: ZooKeeperServer,
) -> None:
    require_root("mounting a tmpfs log dir")
    with TmpfsCluster(brokers=3, config=CONFIG, zookeeper=zookeeper_server) as cluster:
        tp = create_topic(cluster, TOPIC, 1, config={"min.insync.replicas": "2"})[0]
        leader = states(cluster, [tp])[tp].leader
        writer = Writer(cluster.bootstrap_servers)
        writer.thread.start()
        try:
            wait_for(lambda: writer.acked_count() > 200, 60, "writes before the fill")
            _fill_below_floor(cluster.log_dir(leader))

            def handed_over() -> bool:
                s = states(cluster, [tp])[tp]
                return s.leader not in (leader, -1) and leader not in s.isr

            wait_for(handed_over, 60, f"leadership and ISR off broker {leader}")
            assert cluster.brokers[leader].running
            wait_for(lambda: _offline_replicas(cluster, leader) == [leader], 30, "an offline replica")
            moved_at = writer.acked_count()
            wait_for(lambda: writer.acked_count() > moved_at + 200, 60, "acks=all on the new leader")

            (cluster.log_dir(leader) / FILLER).unlink()
            wait_for(lambda: leader in states(cluster, [tp])[tp].isr, 60, "the freed replica in sync")
            wait_for(lambda: _offline_replicas(cluster, leader) == [], 30, "no offline replica")
            back_at = writer.acked_count()
            wait_for(lambda: writer.acked_count() > back_at + 200, 60, "writes with the full ISR")
        finally:
            writer.stop.set()
            writer.thread.join(180)
        assert writer.errors == []
        got = _read_all(cluster)
        assert sorted(got) == sorted(set(got))  # none twice
        assert set(writer.acked) <= set(got)  # every acknowledged value


def _produce(cluster: EmbeddedCluster, values: list[bytes]) -> None:
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 60_000})  # fmt: skip
    for v in values:
        p.produce(TOPIC, v, partition=0, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(90) == 0 and errors == []


def _logged(cluster: EmbeddedCluster, broker: int, text: str) -> bool:
    return any(text in line for line in list(cluster.brokers[broker].output))


def test_a_leader_alone_in_sync_keeps_leading_until_a_follower_catches_up(
    zookeeper_server: ZooKeeperServer,
) -> None:
    """Nobody else has its records: the full leader keeps leading and serving reads; once the
    follower is back in the ISR the leadership moves to it and writes resume."""
    require_root("mounting a tmpfs log dir")
    with TmpfsCluster(brokers=3, config=CONFIG, zookeeper=zookeeper_server) as cluster:
        tp = create_topic(cluster, TOPIC, 1, replication_factor=2, config={"min.insync.replicas": "1"})[0]
        leader = states(cluster, [tp])[tp].leader
        follower = next(b for b in states(cluster, [tp])[tp].isr if b != leader)
        before = [f"before-{i}".encode() for i in range(50)]
        _produce(cluster, before)
        cluster.kill(follower)
        wait_for(lambda: states(cluster, [tp])[tp].isr == (leader,), 30, "the leader alone in sync")
        controller = cluster.wait_for_controller()
        assert controller != follower
        _fill_below_floor(cluster.log_dir(leader))
        # the dir is announced and the controller asks the broker; it keeps its leadership
        wait_for(lambda: _logged(cluster, controller, f"handling log directory failure for brokers [{leader}]"),
                 30, "the controller asked the full broker")  # fmt: skip
        # the broker logs its notice once the znode is written, which the controller may
        # see (and log) first
        wait_for(lambda: _logged(cluster, leader, "log.dir.min.free.bytes, notified the controller"),
                 30, "the full broker's notice")  # fmt: skip
        assert states(cluster, [tp])[tp].leader == leader
        assert sorted(_read_all(cluster)) == sorted(before)  # reads are served

        cluster.start_broker(follower)
        wait_for(lambda: states(cluster, [tp])[tp].leader == follower, 60, "the caught-up follower leads")
        assert leader not in states(cluster, [tp])[tp].isr
        after = [f"after-{i}".encode() for i in range(50)]
        _produce(cluster, after)
        assert sorted(_read_all(cluster)) == sorted(before + after)
