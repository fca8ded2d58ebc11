"""Incremental fetch sessions (KIP-227) at the wire level."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def fetch(
    w: Wire,
    session_id: int,
    epoch: int,
    parts: dict[tuple[str, int], int],
    forgotten: dict[str, list[int]] | None = None,
    max_wait: int = 0,
) -> Any:
    cls = request_class(1, 12)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    fcls = nested(cls, "forgotten_topics_data")
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), offset in parts.items():
        by_topic.setdefault(topic, []).append(
            make(
                pcls,
                partition=p,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                log_start_offset=-1,
                current_leader_epoch=-1,
                last_fetched_epoch=-1,
            )
        )
    body = make(
        cls,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        rack_id="",
        topics=tuple(make(tcls, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(
            make(fcls, topic=t, partitions=tuple(ps)) for t, ps in (forgotten or {}).items()
        ),
    )
    return w.call(1, 12, body=body)


def seen(resp: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic, p.partition_index): p.high_watermark for t in resp.responses for p in t.partitions
    }


def produce(w: Wire, topic: str, partition: int, n: int = 1) -> None:
    w.call(0, 9, body=produce_body(9, topic, {partition: build_batch([(1, None, b"x")] * n)}))


def test_session_lifecycle(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        produce(w, "fs", 0, 2)  # auto-creates fs (1 partition); add a second topic
        produce(w, "fs2", 0, 3)
        full = fetch(w, 0, 0, {("fs", 0): 0, ("fs2", 0): 0})
        sid = full.session_id
        assert full.error_code == 0 and sid > 0
        assert seen(full) == {("fs", 0): 2, ("fs2", 0): 3}
        # the client advanced both positions: nothing new, so no partitions come back
        quiet = fetch(w, sid, 1, {("fs", 0): 2, ("fs2", 0): 3})
        assert (quiet.error_code, quiet.session_id, seen(quiet)) == (0, sid, {})
        # an append to fs-0: only that partition is sent (the request names none)
        produce(w, "fs", 0, 1)
        assert seen(fetch(w, sid, 2, {})) == {("fs", 0): 3}
        # the client did not advance fs-0 (still 2): its record is sent again
        assert seen(fetch(w, sid, 3, {})) == {("fs", 0): 3}
        # advance fs-0 and forget fs2: an append to fs2 is no longer reported
        assert seen(fetch(w, sid, 4, {("fs", 0): 3}, forgotten={"fs2": [0]})) == {}
        produce(w, "fs2", 0, 1)
        assert seen(fetch(w, sid, 5, {})) == {}
        # DeleteRecords moves the log start offset: reported even without records
        w.call(
            21,
            2,
            topics=(
                make(
                    nested(request_class(21, 2), "topics"),
                    name="fs",
                    partitions=(
                        make(
                            nested(nested(request_class(21, 2), "topics"), "partitions"),
                            partition_index=0,
                            offset=1,
                        ),
                    ),
                ),
            ),
            timeout=1000,
        )
        inc = fetch(w, sid, 6, {})
        assert [
            (p.partition_index, p.log_start_offset) for t in inc.responses for p in t.partitions
        ] == [(0, 1)]
        sid_epoch = 7
        # wrong epoch, unknown session
        assert fetch(w, sid, sid_epoch + 5, {}).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert fetch(w, 12345, 1, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # epoch -1 closes the session: a sessionless full fetch
        final = fetch(w, sid, -1, {("fs", 0): 1})
        assert final.session_id == 0 and seen(final) == {("fs", 0): 3}
        assert fetch(w, sid, sid_epoch, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_incremental_long_poll_wakes_on_append(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w, Wire(broker) as other:
        produce(w, "fs-lp", 0, 1)
        sid = fetch(w, 0, 0, {("fs-lp", 0): 0}).session_id
        w.sock.settimeout(20)
        cls_parts = {("fs-lp", 0): 1}
        # send without waiting: a 30 s long poll that the append must wake
        body_resp: dict[str, Any] = {}

        import threading

        t = threading.Thread(
            target=lambda: body_resp.setdefault("r", fetch(w, sid, 1, cls_parts, max_wait=30000))
        )
        t.start()
        while len(broker.broker.purgatory) < 1:
            pass
        produce(other, "fs-lp", 0, 1)
        t.join(20)
    assert seen(body_resp["r"]) == {("fs-lp", 0): 2}


def test_cache_full_declines_new_sessions(tidelog_broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = tidelog_broker_factory({"max.incremental.fetch.session.cache.slots": "0"})
    with Wire(b) as w:
        produce(w, "nocache", 0, 1)
        resp = fetch(w, 0, 0, {("nocache", 0): 0})
    assert resp.session_id == 0 and seen(resp) == {("nocache", 0): 1}
