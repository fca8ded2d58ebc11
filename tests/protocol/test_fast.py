"""The hand-written Produce/Fetch response encoders match kio's writer byte for byte."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.protocol.codec import encode_response, response_class
from tidelog.protocol.fast import (
    FetchPartitionData,
    ProducePartitionResult,
    encode_fetch_response,
    encode_produce_response,
    quiet_partition,
    quiet_partition_slow,
)
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch

BATCH = build_batch([(1_700_000_000_000, b"k", b"v" * 50), (1_700_000_000_001, None, b"w")])


@pytest.mark.parametrize("version", range(3, 14))
def test_produce_response_matches_kio(version: int) -> None:
    parts = [
        ProducePartitionResult(0, 0, 42, -1, 0),
        ProducePartitionResult(
            1, 87, -1, 1_700_000_000_000, 5, [(0, "bad"), (3, None)], "record errors"
        ),
    ]
    a: str | uuid.UUID = "topic-a" if version < 13 else uuid.UUID(int=0xA)
    b: str | uuid.UUID = "b" if version < 13 else uuid.UUID(int=0xB)
    ours = encode_produce_response(7, version, [(a, parts), (b, [])])
    cls = response_class(0, version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partition_responses")
    ecls = nested(pcls, "record_errors") if version >= 8 else None

    def kp(p: ProducePartitionResult) -> object:
        errs = (
            tuple(
                make(ecls, batch_index=i, batch_index_error_message=m) for i, m in p.record_errors
            )
            if ecls
            else ()
        )
        return make(
            pcls,
            index=p.index,
            error_code=p.error_code,
            base_offset=p.base_offset,
            log_append_time=p.log_append_time,
            log_start_offset=p.log_start_offset,
            record_errors=errs,
            error_message=p.error_message,
        )

    kio_resp = make(
        cls,
        responses=(
            make(tcls, name=a, topic_id=a, partition_responses=tuple(kp(p) for p in parts)),
            make(tcls, name=b, topic_id=b, partition_responses=()),
        ),
        throttle_time=0,
    )
    assert ours == encode_response(7, kio_resp)


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("name", ["t", "é" * 100, "x" * 249])
@pytest.mark.parametrize("throttle", [0, 250])
def test_one_partition_produce_response_matches_kio(version: int, name: str,
                                                    throttle: int) -> None:
    """librdkafka's shape (one topic, one partition; its own encoding at v9-v12) and the
    same partition with an error message (the general encoding)."""
    cls = response_class(0, version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partition_responses")
    topic: str | uuid.UUID = name if version < 13 else uuid.UUID(int=0xC)
    for p in (ProducePartitionResult(3, 0, 1 << 40, -1, 17),
              ProducePartitionResult(5, 6, -1, -1, -1, error_message="not the leader")):
        ours = encode_produce_response(2**31 - 1, version, [(topic, [p])], throttle)
        kp = make(pcls, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                  log_append_time=p.log_append_time, log_start_offset=p.log_start_offset,
                  record_errors=(), error_message=p.error_message)
        kio_resp = make(cls, responses=(make(tcls, name=topic, topic_id=topic,
                                             partition_responses=(kp,)),),
                        throttle_time=throttle)
        assert ours == encode_response(2**31 - 1, kio_resp)


@pytest.mark.parametrize("version", range(4, 19))
def test_fetch_response_matches_kio(version: int) -> None:
    parts = [
        FetchPartitionData(0, 0, 10, 10, 0, None, BATCH),
        FetchPartitionData(1, 1, 5, 5, 2, [(7, 3)], b""),
        FetchPartitionData(2, 3, -1, -1, -1, None, None),
        FetchPartitionData(3, 0, 8, 8, 0, None, b"", preferred_read_replica=2),  # KIP-392
    ]
    topic: str | uuid.UUID = "t" if version < 13 else uuid.UUID(int=0x1234)
    ours = b"".join(
        bytes(c) for c in encode_fetch_response(9, version, [(topic, parts)], session_id=0)
    )
    cls = response_class(1, version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partitions")
    acls = nested(pcls, "aborted_transactions")

    def kp(p: FetchPartitionData) -> object:
        aborted = (
            None
            if p.aborted_transactions is None
            else tuple(make(acls, producer_id=a, first_offset=b) for a, b in p.aborted_transactions)
        )
        return make(
            pcls,
            partition_index=p.index,
            error_code=p.error_code,
            high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset,
            aborted_transactions=aborted,
            preferred_read_replica=p.preferred_read_replica,
            records=p.records,
        )

    kio_resp = make(
        cls,
        throttle_time=0,
        error_code=0,
        session_id=0,
        responses=(
            make(tcls, topic=topic, topic_id=topic, partitions=tuple(kp(p) for p in parts)),
        ),
    )
    assert ours == encode_response(9, kio_resp)


def test_fetch_records_are_not_copied() -> None:
    view = memoryview(BATCH)
    chunks = encode_fetch_response(1, 12, [("t", [FetchPartitionData(0, 0, 2, 2, 0, None, view)])])
    assert any(c is view for c in chunks)


@settings(max_examples=200, deadline=None)
@given(version=st.integers(4, 18), index=st.integers(0, 2**31 - 1),
       offsets=st.tuples(*[st.integers(-1, 2**63 - 1)] * 3))
def test_a_quiet_partition_is_what_the_encoder_writes(version: int, index: int,
                                                      offsets: tuple[int, int, int]) -> None:
    """quiet_partition (offsets packed, the rest kept per version) == the encoder's bytes."""
    hw, lso, start = offsets
    assert quiet_partition(index, hw, lso, start, version) == \
        quiet_partition_slow(index, hw, lso, start, version)
