"""A consumer's sessionless Fetch read in columns (server/sessionless_fetches.py) answers
byte for byte what the per-partition path answers the same request decoded by kio, in every
state a partition can be in (records, nothing new, a leader epoch either side, out of range,
an open transaction, a moved log start, no such partition, an unknown topic), after each
change that must drop a kept answer; and a parked one wakes on an append."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import io
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from tidelog.protocol.codec import decode_request, request_class
from tidelog.protocol.fetch_request import SessionlessFetch, decode_sessionless_fetch
from tidelog.protocol.kio_util import make, nested
from tidelog.records import ControlRecordType, RecordBatchBuilder, build_batch
from tidelog.server import quiet_table, replica_fetches
from tidelog.server.cluster.partition import Partition
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.context import RequestContext
from tidelog.server.handlers import fetch
from tidelog.server.sendfile import FileChunk, close_chunks
from tidelog.storage.validator import AppendOrigin
from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_capability
from tidelog.util.topic_partition import TopicPartition

TOPIC = "quiet"
PARTS = 8


def batch(n: int, **kw: Any) -> bytes:
    return build_batch([(1_700_000_000_000 + i, None, b"v%d" % i) for i in range(n)], **kw)


def frame(version: int, offsets: dict[int, tuple[int, int]], topic_id: uuid.UUID, *,
          isolation: int = 0, max_wait: int = 0, extra_topic: bool = False,
          partition_max_bytes: int = 1 << 20, min_bytes: int = 1) -> bytes:
    cls = request_class(1, version)
    tcls, fcls = nested(cls, "topics"), None
    pcls = nested(tcls, "partitions")

    def topic(name: str, tid: uuid.UUID, parts: dict[int, tuple[int, int]]) -> Any:
        return make(tcls, topic=name, topic_id=tid, partitions=tuple(
            make(pcls, partition=p, current_leader_epoch=e, fetch_offset=o,
                 partition_max_bytes=partition_max_bytes, log_start_offset=-1,
                 last_fetched_epoch=-1)
            for p, (o, e) in parts.items()))

    topics = [topic(TOPIC, topic_id, offsets)]
    if extra_topic:  # a name (or id) unknown here
        topics.append(topic("nope", uuid.UUID(int=99), {0: (0, -1)}))
    body = make(cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait),
                min_bytes=min_bytes, max_bytes=50 << 20, isolation_level=isolation, session_id=0,
                session_epoch=-1, rack_id="", forgotten_topics_data=fcls or (),
                topics=tuple(topics))
    hdr = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr)(buf, hdr(request_api_key=1, request_api_version=version,
                                correlation_id=5, client_id="t"))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


async def answer(b: EmbeddedBroker, data: bytes, version: int, columns: bool) -> bytes:
    if columns:
        decoded = decode_sessionless_fetch(data, version)
        assert decoded is not None
        header, request = decoded
        assert isinstance(request, SessionlessFetch)
    else:
        header, request = decode_request(data)
    ctx = RequestContext(header, b.broker, "127.0.0.1", 1)
    chunks = await fetch.handle(ctx, request)
    try:
        return b"".join(c.read() if isinstance(c, FileChunk) else bytes(c) for c in chunks)
    finally:
        close_chunks(chunks)


@pytest.fixture(scope="module")
def broker() -> Any:
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:
        rm = b.broker.replica_manager

        async def setup() -> None:
            rm.create_topic(TOPIC, PARTS)
            for p in (1, 2, 3, 5):
                rm.append(TopicPartition(TOPIC, p), batch(3 + p))
            rm.append(TopicPartition(TOPIC, 4), batch(2))
            rm.append(TopicPartition(TOPIC, 4), batch(
                2, producer_id=4000, producer_epoch=0, base_sequence=0, is_transactional=True))
            rm.delete_records(TopicPartition(TOPIC, 5), 2)

        b.run(setup())
        yield b


def topic_id(b: EmbeddedBroker) -> uuid.UUID:
    return b.broker.replica_manager.topic(TOPIC).topic_id  # type: ignore[no-any-return]


def positions(b: EmbeddedBroker) -> dict[int, tuple[int, int]]:
    """Each partition at a different spot (partition -> (offset, current leader epoch))."""
    rm = b.broker.replica_manager
    part = {p: rm.partitions[TopicPartition(TOPIC, p)] for p in range(PARTS)}
    epoch = part[0].leader_epoch
    return {0: (part[0].high_watermark, -1), 1: (0, epoch), 2: (part[2].high_watermark, epoch),
            3: (part[3].high_watermark, epoch + 1), 4: (part[4].high_watermark, -1),
            5: (part[5].high_watermark, -1), 6: (1000, -1), 7: (0, -1), PARTS + 3: (0, -1)}


def same(b: EmbeddedBroker, version: int, **kw: Any) -> bytes:
    data = frame(version, kw.pop("offsets", None) or positions(b), topic_id(b), **kw)

    async def both() -> tuple[bytes, bytes]:
        return (await answer(b, data, version, True), await answer(b, data, version, False))

    ours, theirs = b.run(both())
    assert ours == theirs
    return ours


@pytest.mark.parametrize("version", [4, 5, 9, 11, 12, 13, 16, 18])
def test_every_state_answers_as_the_per_partition_path(broker: EmbeddedBroker,
                                                       version: int) -> None:
    first = same(broker, version)
    rm = broker.broker.replica_manager
    part = {p: rm.partitions[TopicPartition(TOPIC, p)] for p in range(PARTS)}
    kept = {p for p in range(PARTS) if part[p].quiet is not None}
    assert {0, 2, 7} <= kept and 4 not in kept  # 4: a transaction open, its LSO below its HW
    assert part[4].last_stable_offset < part[4].high_watermark
    assert part[5].log_start_offset == 2
    assert same(broker, version) == first  # the answers kept the first time
    same(broker, version, isolation=1)  # read_committed: partition 4's LSO below its HW
    same(broker, version, extra_topic=True)
    assert set(rm._quiet_tables) <= {TOPIC}  # a name not hosted here is kept nowhere


def test_each_change_drops_the_kept_answer(broker: EmbeddedBroker) -> None:
    rm = broker.broker.replica_manager
    tp0 = TopicPartition(TOPIC, 0)
    before = same(broker, 16)
    broker.run(_async(lambda: rm.append(tp0, batch(4))))  # HW moves: partition 0 has records
    assert same(broker, 16, offsets={0: (0, -1)}) != before
    same(broker, 16)
    hw = rm.partitions[tp0].high_watermark
    broker.run(_async(lambda: rm.delete_records(tp0, hw - 1)))  # the log start moves
    same(broker, 16)
    part = rm.partitions[tp0]
    state = LeaderAndIsrPartitionState(TOPIC, 0, 0, rm.node_id, part.leader_epoch + 1,
                                       (rm.node_id,), part.partition_epoch + 1, (rm.node_id,))
    broker.run(_async(lambda: part.make_leader(state)))  # a new leader epoch
    same(broker, 16)
    same(broker, 16, offsets={0: (hw, part.leader_epoch - 1)})  # fenced now


def test_a_parked_fetch_wakes_on_an_append(broker: EmbeddedBroker) -> None:
    rm = broker.broker.replica_manager
    tp = TopicPartition(TOPIC, 7)
    hw = rm.partitions[tp].high_watermark
    data = frame(16, {7: (hw, -1), 6: (0, -1)}, topic_id(broker), max_wait=30_000)

    async def park_then_append() -> bytes:
        task = asyncio.ensure_future(answer(broker, data, 16, True))
        await asyncio.sleep(0.05)
        assert not task.done() and len(rm.delayed_fetch) == 2  # parked on both
        rm.append(tp, batch(1))
        return await asyncio.wait_for(task, 20)  # woken: not the 30 s of max_wait

    out = broker.run(park_then_append())
    assert batch(1)[-10:] in out  # the record's bytes are in the answer
    assert len(rm.delayed_fetch) == 0


def test_a_fetch_short_of_min_bytes_parks_again_until_max_wait(
        broker: EmbeddedBroker) -> None:
    """Woken by an append that leaves it short of ``min_bytes``, a parked Fetch reads, parks
    again, and at ``max_wait`` answers what it found (Kafka's DelayedFetch)."""
    rm = broker.broker.replica_manager
    tp = TopicPartition(TOPIC, 6)
    hw = rm.partitions[tp].high_watermark
    data = frame(16, {6: (hw, -1)}, topic_id(broker), max_wait=1_500, min_bytes=1 << 20)

    async def park_append_wait() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.ensure_future(answer(broker, data, 16, True))
        await asyncio.sleep(0.05)
        assert not task.done() and len(rm.delayed_fetch) == 1
        rm.append(tp, batch(1))  # woken, a few bytes: short of min_bytes
        await asyncio.sleep(0.05)
        assert not task.done() and len(rm.delayed_fetch) == 1  # parked again
        out = await asyncio.wait_for(task, 20)
        return out, loop.time() - started

    out, waited = broker.run(park_append_wait())
    assert batch(1)[-10:] in out  # answered the record it found, at max_wait
    assert waited >= 1.4 and len(rm.delayed_fetch) == 0


def test_a_partition_read_on_from_its_quiet_answer_starts_where_the_answer_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition answered quiet at its HW, appended to, then read from that HW: read from
    the position the answer noted (``sessionless_fetches.fetch_at_position``: no ``fetch_records``),
    byte for byte as the per-partition path answers, read_committed too (librdkafka's
    default) while the LSO is the HW; and the long way, as that path, where that is not all
    it takes: another leader epoch named, a byte limit below the records, the segment
    rolled since, records of 32 KiB and more, read_committed with a transaction open (LSO
    below the HW) or an aborted one listed in the segment."""
    taken: list[int] = []
    real = Partition.fetch_records

    def spy(self: Partition, *args: Any, **kw: Any) -> None:
        taken.append(self.topic_partition.partition)
        real(self, *args, **kw)

    monkeypatch.setattr(Partition, "fetch_records", spy)
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:
        rm = b.broker.replica_manager
        tps = [TopicPartition(TOPIC, p) for p in range(4)]
        b.run(_async(lambda: rm.create_topic(TOPIC, 4)))
        for tp in tps:
            b.run(_async(lambda tp=tp: rm.append(tp, batch(2))))

        def hws() -> dict[int, int]:
            return {tp.partition: rm.partitions[tp].high_watermark for tp in tps}

        def read_on(value: bytes, epochs: dict[int, int], **kw: Any) -> set[int]:
            """Each partition appended ``value`` after a Fetch at its HW, then read from
            there: the partitions read the long way (compared with the per-partition path)."""
            at = hws()
            assert same(b, 16, offsets={p: (o, -1) for p, o in at.items()}, **kw)
            for tp in tps:
                b.run(_async(lambda tp=tp: rm.append(tp, value)))
            data = frame(16, {p: (o, epochs.get(p, -1)) for p, o in at.items()}, topic_id(b),
                         **kw)
            taken.clear()
            ours = b.run(answer(b, data, 16, True))
            slow = set(taken)
            assert ours == b.run(answer(b, data, 16, False))
            assert all(bytes(value[-20:]) in ours for p in range(4) if p not in slow)
            return slow

        epoch = rm.partitions[tps[1]].leader_epoch
        assert read_on(batch(3), {1: epoch, 2: epoch + 1}) == {2}  # 2: fenced, the long way
        assert read_on(batch(4), {}, partition_max_bytes=40) == {0, 1, 2, 3}  # over the limit
        assert read_on(batch(2), {}, isolation=1) == set()  # read_committed, LSO at the HW
        b.run(_async(lambda: rm.partitions[tps[3]].log.roll()))
        assert read_on(batch(2), {}) == {3}  # 3: its segment rolled since
        assert read_on(build_batch([(1, None, b"x" * 40_000)]), {}) == {0, 1, 2, 3}
        assert read_on(batch(5), {0: epoch}) == set()  # all from where they were said to start
        # read_committed with a transaction: while it is open (partition 1's LSO below its
        # HW), and once aborted (its marker listed in partition 1's transaction index)
        txn = batch(2, producer_id=4100, producer_epoch=0, base_sequence=0,
                    is_transactional=True)
        b.run(_async(lambda: rm.append(tps[1], txn)))
        assert read_on(batch(2), {}, isolation=1) == {1}
        assert read_on(batch(2), {}, isolation=0) == {1}  # (no quiet answer to start from)
        marker = RecordBatchBuilder(producer_id=4100, producer_epoch=0, is_transactional=True,
                                    is_control=True)
        marker.append_control(ControlRecordType.ABORT, 1_700_000_000_000, 0)
        b.run(_async(lambda: rm.append(tps[1], marker.build(),
                                       origin=AppendOrigin.COORDINATOR)))
        assert read_on(batch(2), {}, isolation=1) == {1}
        assert read_on(batch(2), {}, isolation=0) == {1}  # (the check is the segment's)


async def _async(fn: Any) -> Any:
    return fn()


def _native() -> Any:
    try:
        core: Any = importlib.import_module("tidelog._native._core")
    except ImportError:
        core = None
    require_capability("native core", core is not None, "build it: setup.py build_ext")
    return core


V12 = struct.Struct(">iiq12xix")  # a partition's entry at Fetch v12+ (protocol/fetch_request.py)
V4 = struct.Struct(">iqi")  # ... at v4 (no leader epoch)


def entries(ids: Sequence[int], epochs: Sequence[int], offsets: Sequence[int],
            with_epochs: bool = True) -> tuple[bytes, int, int, int]:
    """(raw, size, epoch_at, offset_at) of a request's entries, as quiet_runs takes them."""
    if with_epochs:
        raw = b"".join(V12.pack(p, e, o, 1 << 20)
                       for p, e, o in zip(ids, epochs, offsets, strict=True))
        return raw, V12.size, 4, 8
    raw = b"".join(V4.pack(p, o, 1 << 20) for p, o in zip(ids, offsets, strict=True))
    return raw, V4.size, -1, 4


def test_the_native_scan_answers_as_its_twin(broker: EmbeddedBroker) -> None:
    """The C loop (tidelog._native quiet_runs) and quiet_runs_py, on a live topic's table:
    kept answers, stale ones (another version, a moved stamp), no partition, epochs either
    side."""
    core = _native()
    rm = broker.broker.replica_manager
    same(broker, 16)  # answers kept at v16
    table = rm._quiet_table(TOPIC)
    parts = list(range(PARTS + 1))  # and one index past the table
    hws = [rm.partitions[TopicPartition(TOPIC, p)].high_watermark if p < PARTS else 0
           for p in parts]
    epochs = [rm.partitions[TopicPartition(TOPIC, p)].leader_epoch if p < PARTS else 0
              for p in parts]
    cases = [entries(parts, epochs, hws),
             entries(parts, [e + 1 for e in epochs], hws),
             entries(parts, [-1] * len(parts), [h + 1 for h in hws]),
             entries(parts[::-1], [-1] * len(parts), hws[::-1]),
             entries(parts, epochs, hws, with_epochs=False)]
    for version in (16, 12):
        for case in cases:
            assert core.quiet_runs(table.slots, *case, version) == \
                quiet_table.quiet_runs_py(table.slots, *case, version)
    assert quiet_table.quiet_runs_py(table.slots, *cases[0], 12)[2]  # stale at v12
    runs, slow, stale = quiet_table.quiet_runs_py(table.slots, *cases[0], 16)
    assert b"".join(runs) and slow[-1] == PARTS and PARTS not in stale


def test_the_table_follows_each_stamp_move(broker: EmbeddedBroker) -> None:
    """Each Log writes its stamp into its partition's slot as it moves (``mirror_stamp``):
    a kept answer is stale after an append and after a log-start move, current again once
    answered, and a table made again takes the slots over (the old one no longer
    written)."""
    rm = broker.broker.replica_manager
    same(broker, 16)
    table = rm._quiet_table(TOPIC)
    tp = TopicPartition(TOPIC, 2)
    log = rm.partitions[tp].log

    def stamps(t: quiet_table.QuietTable) -> tuple[int, int]:
        now, kept = quiet_table.SLOT.unpack_from(t.slots, 2 * quiet_table.SLOT.size)[:2]
        return now, kept

    now, kept = stamps(table)
    assert now == kept == log.state_stamp
    broker.run(_async(lambda: rm.append(tp, batch(2))))
    assert stamps(table) == (log.state_stamp, kept) and log.state_stamp != kept
    assert table.answer(2, 16) is not None and stamps(table) == (log.state_stamp,) * 2
    broker.run(_async(lambda: rm.delete_records(tp, log.high_watermark - 1)))
    assert stamps(table)[0] == log.state_stamp != stamps(table)[1]
    rm.partitions_made += 1  # the tables are made again at the next Fetch
    after = rm._quiet_table(TOPIC)
    assert after is not table and log.stamp_cell is not None
    assert log.stamp_cell[0] is after.slots
    frozen = bytes(table.slots)
    broker.run(_async(lambda: rm.append(tp, batch(1))))
    assert bytes(table.slots) == frozen and stamps(after)[0] == log.state_stamp


@st.composite
def _tables(draw: st.DrawFn) -> tuple[Any, ...]:
    size = draw(st.integers(0, 12))
    slots = bytearray(quiet_table.SLOT.size * size)
    for p in range(size):
        kept = draw(st.integers(0, 3))
        now = draw(st.sampled_from([kept, kept + 1]))  # current, or moved since
        version = draw(st.sampled_from([quiet_table.EMPTY, quiet_table.NOT_HOSTED, 12, 16]))
        entry = draw(st.binary(max_size=quiet_table.ENTRY_MAX))
        quiet_table.SLOT.pack_into(slots, p * quiet_table.SLOT.size, now, kept,
                                   draw(st.integers(0, 3)), draw(st.integers(-1, 2)), version,
                                   len(entry), entry)
    n = draw(st.integers(0, 16))
    ids = draw(st.lists(st.integers(-2, size + 1), min_size=n, max_size=n))
    epochs = draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))
    offsets = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    raw = entries(ids, epochs, offsets, draw(st.booleans()))
    return slots, *raw, draw(st.sampled_from([12, 16]))


@settings(max_examples=400, deadline=None)
@given(_tables())
def test_the_native_runs_match_the_twin_on_any_table(case: tuple[Any, ...]) -> None:
    """quiet_runs (C) == quiet_runs_py over random tables and requests: every slot state
    (nothing kept, not hosted, another version, a moved stamp), indexes out of the table
    either side, epochs and offsets either side of the kept ones."""
    ours = _native().quiet_runs(*case)
    theirs = quiet_table.quiet_runs_py(*case)
    assert ours == theirs
    runs, slow, stale = theirs
    assert len(runs) == len(slow) + 1 and set(stale) <= set(slow)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 70), max_size=40), st.booleans(), st.integers(-5, 80))
def test_the_partitions_a_parked_fetch_waits_for_are_the_ones_it_names(
        ids: list[int], with_epochs: bool, probe: int) -> None:
    """The bitmap of a topic's partition indexes (C ``fetch_ids_bits`` and ``ids_bits_py``)
    answers ``in`` and ``len`` as the frozenset of them; None (then a frozenset) for a
    negative index."""
    raw, size, _, _ = entries(ids, [0] * len(ids), [0] * len(ids), with_epochs)
    theirs = quiet_table.ids_bits_py(raw, size)
    assert _native().fetch_ids_bits(raw, size) == theirs
    if any(p < 0 for p in ids):
        assert theirs is None
        return
    assert theirs is not None
    bits = quiet_table.PartitionBits(theirs)
    assert len(bits) == len(set(ids))
    assert all(p in bits for p in ids) and (probe in bits) == (probe in set(ids))
    assert "1" not in bits and quiet_table.ids_bits_py(V4.pack(1 << 20, 0, 0), V4.size) is None


def test_a_partition_dropped_while_the_fetch_yields_is_read_as_it_is_now() -> None:
    """The reads after the loop's turn (every YIELD_EVERY) ask the partitions as they are
    then: one dropped and deleted meanwhile is answered as the per-partition path answers
    it afterwards, not read from the Partition the topic's table held before."""
    n = replica_fetches.YIELD_EVERY + 10
    moved = TopicPartition(TOPIC, n - 1)
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:
        rm = b.broker.replica_manager

        async def setup() -> None:
            rm.create_topic(TOPIC, n)
            for p in range(n):
                rm.append(TopicPartition(TOPIC, p), batch(2))

        b.run(setup())
        data = frame(16, dict.fromkeys(range(n), (0, -1)), topic_id(b))

        async def stepped() -> tuple[int, bytes]:
            decoded = decode_sessionless_fetch(data, 16)
            assert decoded is not None
            header, request = decoded
            coro = fetch.handle(RequestContext(header, b.broker, "127.0.0.1", 1), request)
            turns = 0
            while True:  # step it as a task would; at its first turn, drop the partition
                try:
                    assert coro.send(None) is None
                except StopIteration as done:
                    return turns, b"".join(bytes(c) for c in done.value)
                if turns == 0:
                    rm.stop_replicas(rm.controller_epoch, {moved: (-1, True)})
                turns += 1

        turns, ours = b.run(stepped())
        assert turns == 1
        assert ours == b.run(answer(b, data, 16, False))



@settings(max_examples=80, deadline=None)
@given(wait=st.integers(0, 600_000), min_bytes=st.integers(-1, 1 << 20),
       max_bytes=st.integers(-5, (1 << 31) - 1), isolation=st.integers(0, 1),
       rack=st.sampled_from([None, "", "r1", "r2"]), version=st.sampled_from([4, 10, 11, 16]),
       listener=st.sampled_from(["PLAINTEXT", "INTERNAL"]), limit=st.integers(1, 60 << 20))
def test_the_kept_params_are_the_ones_fetch_params_makes(
        broker: EmbeddedBroker, wait: int, min_bytes: int, max_bytes: int, isolation: int,
        rack: str | None, version: int, listener: str, limit: int) -> None:
    """``sessionless_params`` hands back one FetchParams per set of fields: equal to what
    ``fetch_params`` makes of the request, whatever was kept before for other fields, with
    ``fetch.max.bytes`` as it is now."""
    values = broker.broker.config.values
    saved = values["fetch.max.bytes"]
    header, _ = decode_request(frame(version, {0: (0, -1)}, topic_id(broker)))
    ctx = RequestContext(header, broker.broker, "127.0.0.1", 1, listener_name=listener)
    request = SessionlessFetch(version, wait, min_bytes, max_bytes, isolation, [], rack)
    try:
        kept = fetch.sessionless_params(ctx, request)
        assert kept == fetch.fetch_params(ctx, request)
        assert fetch.sessionless_params(ctx, SessionlessFetch(
            version, wait, min_bytes, max_bytes, isolation, [], rack)) is kept
        values["fetch.max.bytes"] = limit  # a dynamic change is seen by the next Fetch
        assert fetch.sessionless_params(ctx, request) == fetch.fetch_params(ctx, request)
    finally:
        values["fetch.max.bytes"] = saved
    assert len(fetch._PARAMS) <= fetch._PARAMS_MAX
