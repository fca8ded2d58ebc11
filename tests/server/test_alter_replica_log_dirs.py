"""AlterReplicaLogDirs: a partition moved between two log dirs by a future log that catches
up and swaps in (in process here; tests/integration/test_log_dir_move_crash.py kills the
broker mid-move)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from broker_wire import Wire, fetch_body, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker


def alter(w: Wire, path: Path | str, topic: str, partitions: list[int]) -> list[int]:
    cls = request_class(34, 2)
    dcls = nested(cls, "dirs")
    tcls = nested(dcls, "topics")
    resp: Any = w.call(34, 2, body=make(cls, dirs=(make(dcls, path=str(path), topics=(
        make(tcls, name=topic, partitions=tuple(partitions)),)),)))
    return [int(p.error_code) for r in resp.results for p in r.partitions]


def where(tmp: Path, name: str) -> list[str]:
    return sorted(p.parent.name + "/" + p.name for p in tmp.glob(f"d*/{name}*"))


def test_move_between_log_dirs(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}", "num.partitions": "1"}) as b, Wire(b) as w:
        batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(100)])
        for _ in range(20):
            assert w.call(0, 9, body=produce_body(9, "mv", {0: batch})) is not None
        src = Path(b.broker.replica_manager.get_log(_tp("mv")).dir).parent
        dst = d2 if src == d1 else d1
        assert alter(w, src, "mv", [0]) == [0]  # already there: no-op
        assert alter(w, tmp_path / "nope", "mv", [0]) == [ErrorCode.LOG_DIR_NOT_FOUND]
        assert alter(w, dst, "mv", [7]) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert alter(w, dst, "mv", [0]) == [0]
        deadline = time.monotonic() + 30
        while Path(b.broker.replica_manager.get_log(_tp("mv")).dir).parent != dst:
            assert time.monotonic() < deadline, where(tmp_path, "mv")
            time.sleep(0.05)
        assert not list(dst.glob("mv-0.*-future"))
        assert list(src.glob("mv-0.*-delete")) or not (src / "mv-0").exists()
        for _ in range(5):  # appends go to the moved log
            assert w.call(0, 9, body=produce_body(9, "mv", {0: batch})) is not None
        fetched: Any = w.call(1, 12, body=fetch_body(12, "mv", {0: 0}))
        assert fetched.responses[0].partitions[0].high_watermark == 2500
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}"}) as b:  # and it is there after a restart
        lg = b.broker.replica_manager.get_log(_tp("mv"))
        assert (Path(lg.dir).parent, lg.log_end_offset) == (dst, 2500)


def _tp(topic: str) -> Any:
    from tidelog.util.topic_partition import TopicPartition

    return TopicPartition(topic, 0)


def test_describe_log_dirs_shows_the_future_replica(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}", "num.partitions": "1"}) as b, Wire(b) as w:
        batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(10)])
        assert w.call(0, 9, body=produce_body(9, "fut", {0: batch})) is not None
        src = Path(b.broker.replica_manager.get_log(_tp("fut")).dir).parent
        dst = d2 if src == d1 else d1

        # started but not stepped (no wake): the future log is empty, 10 offsets behind
        b.run(_start(b, "fut", dst))
        resp: Any = w.call(35, 4, topics=None)
        rows = {(r.log_dir, p.is_future_key): p.offset_lag
                for r in resp.results for t in r.topics if t.name == "fut"
                for p in t.partitions}
        assert rows == {(str(src.resolve()), False): 0, (str(dst.resolve()), True): 10}
        b.run(_wake(b))  # on the broker's loop: asyncio.Event is not thread-safe


def test_deleting_a_moving_partition_drops_its_future_log(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}", "num.partitions": "1"}) as b, Wire(b) as w:
        batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(10)])
        assert w.call(0, 9, body=produce_body(9, "gone", {0: batch})) is not None
        src = Path(b.broker.replica_manager.get_log(_tp("gone")).dir).parent
        dst = d2 if src == d1 else d1
        from tidelog.server.log_dir_moves import log_dir_mover

        b.run(_start(b, "gone", dst))
        assert list(dst.glob("gone-0.*-future"))
        cls = request_class(20, 6)
        tcls = nested(cls, "topics")
        resp: Any = w.call(20, 6, body=make(cls, timeout_ms=10000,
                                            topics=(make(tcls, name="gone", topic_id=None),)))
        assert resp.responses[0].error_code == 0
        b.run(_wake(b))  # on the broker's loop: asyncio.Event is not thread-safe
        deadline = time.monotonic() + 10
        while list(dst.glob("gone-0.*-future")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not log_dir_mover(b.broker).moves.pending()


async def _start(b: EmbeddedBroker, topic: str, dst: Path) -> None:
    from tidelog.server.log_dir_moves import log_dir_mover

    log_dir_mover(b.broker).moves.alter(_tp(topic), dst)


def test_a_future_log_of_a_deleted_topic_is_removed_at_startup(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}"}):
        pass
    stray = d2 / ("nosuch-0." + "ab" * 16 + "-future")
    stray.mkdir()
    with EmbeddedBroker({"log.dirs": f"{d1},{d2}"}) as b:
        assert not stray.exists()
        assert b.broker.replica_manager.get_log(_tp("nosuch")) is None


async def _wake(b: EmbeddedBroker) -> None:
    from tidelog.server.log_dir_moves import log_dir_mover

    log_dir_mover(b.broker).wake()
