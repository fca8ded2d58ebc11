"""SIGKILL a broker right after it answered a LeaderAndIsr moving 200 partitions it leads to
a new leader epoch (and two of them took records of it): each partition's
``leader-epoch-checkpoint`` names the new epoch already (written off the event loop, before
the answer). After a restart on the same log dir the recovered logs keep the epochs their
records carry: a partition with records of epoch 1 leads at epoch 1, epoch 0 ending where 1
starts; an entry no record follows is dropped, as Kafka's LogLoader drops it
(truncateFromEnd at the log end offset)."""

from __future__ import annotations

import sys
from pathlib import Path

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from leader_epoch_support import (
    create_topic,
    epoch_end,
    lai_errors,
    leader_and_isr_at,
    produce_records,
)
from serve_process import ServeProcess

PARTITIONS = 200
TIMEOUT_S = 60.0


def connect(broker: ServeProcess, client_id: str) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", broker.port, client_id=client_id, timeout_s=TIMEOUT_S)


def checkpoints(log_dir: Path) -> list[str]:
    return [(log_dir / f"big-{p}" / LEADER_EPOCH_CHECKPOINT_FILE).read_text()
            for p in range(PARTITIONS)]


def test_the_new_epochs_are_on_disk_when_the_leader_and_isr_is_answered(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    broker = ServeProcess(logs).start()
    try:
        conn = connect(broker, "controller")
        node = int(conn.call(3, 12, {"topics": []}).brokers[0].node_id)
        assert create_topic(conn, "big", PARTITIONS) == ErrorCode.NONE
        assert produce_records(conn, "big", 0, 3, acks=-1) == (ErrorCode.NONE, 0)  # epoch 0: 0-2
        resp = conn.call(4, 7, leader_and_isr_at(node, "big", PARTITIONS, 1))
        assert lai_errors(resp) == [ErrorCode.NONE] * PARTITIONS
        assert produce_records(conn, "big", 0, 2, acks=-1) == (ErrorCode.NONE, 3)  # epoch 1: 3-4
        assert produce_records(conn, "big", 5, 1, acks=-1) == (ErrorCode.NONE, 0)  # epoch 1: 0
        broker.kill()  # SIGKILL: no clean shutdown, nothing written after the acks
        conn.close()
        assert checkpoints(logs) == ["0\n2\n0 0\n1 3\n"] + ["0\n1\n1 0\n"] * (PARTITIONS - 1)

        broker.start()  # an unclean start: the logs are recovered
        conn = connect(broker, "client")
        assert epoch_end(conn, "big", 0, 1, 0) == (ErrorCode.NONE, 0, 3)
        assert epoch_end(conn, "big", 0, 1, 1) == (ErrorCode.NONE, 1, 5)
        assert epoch_end(conn, "big", 5, 1, 1) == (ErrorCode.NONE, 1, 1)
        # no record of any epoch: none kept, the partition led at epoch 0 (one-broker mode:
        # the epoch its log last saw)
        assert epoch_end(conn, "big", 1, 0, 0) == (ErrorCode.NONE, -1, -1)
        assert produce_records(conn, "big", 0, 1, acks=-1) == (ErrorCode.NONE, 5)
        conn.close()
        after = checkpoints(logs)
        assert (after[0], after[5]) == ("0\n2\n0 0\n1 3\n", "0\n1\n1 0\n")
        assert set(after[1:5] + after[6:]) == {"0\n0\n"}
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
