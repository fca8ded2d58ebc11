"""The test ZooKeeper server: a real standalone ZooKeeper on a free port."""

from __future__ import annotations

from tidelog.testing.capability import require_zookeeper
from tidelog.testing.zookeeper import ZooKeeperServer, four_letter


def test_zookeeper_server_answers_and_stops() -> None:
    require_zookeeper()
    with ZooKeeperServer() as zk:
        port = zk.port
        assert four_letter(port, "ruok") == "imok"
        assert "Mode: standalone" in four_letter(port, "srvr")
        proc = zk.process
        assert proc is not None
    assert proc.poll() is not None, "the server process is stopped on exit"


def test_zookeeper_connect_is_a_fresh_chroot(zookeeper_server, zookeeper_connect) -> None:
    assert zookeeper_connect.startswith(zookeeper_server.hosts + "/t")
    assert four_letter(zookeeper_server.port, "ruok") == "imok"
