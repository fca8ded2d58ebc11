"""The inter-broker schemas kio no longer carries (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown), checked against bytes built here by hand, field by field, in the order
and encodings Kafka 3.6's JSON schemas give (all are flexible versions: compact strings and
arrays as length + 1 varints, a tagged-field section after every struct), both ways: kio's
writer must produce exactly these bytes and kio's reader must give back the same object.
Then whole frames go through tidelog.protocol.codec as a broker receives and answers them."""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from tidelog.protocol import inter_broker
from tidelog.protocol.codec import (
    UnsupportedVersionError,
    decode_request,
    encode_response,
    request_class,
    response_class,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


# --- a hand encoder, independent of kio ---------------------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def boolean(b: bool) -> bytes:
    return b"\x01" if b else b"\x00"


def cstr(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carr(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def ints(values: list[int]) -> bytes:
    return carr([i32(v) for v in values])


NO_TAGS = uvarint(0)


def roundtrip(cls: type, obj: object, expected: bytes) -> None:
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    assert buf.getvalue().hex() == expected.hex()
    parsed, size = entity_reader(cls)(expected, 0)
    assert size == len(expected)
    assert parsed == obj


# --- LeaderAndIsr ---------------------------------------------------------------------------


def _lai_partition_bytes(version: int) -> bytes:
    out = (
        i32(3)  # partition_index
        + i32(9)  # controller_epoch
        + i32(2)  # leader
        + i32(14)  # leader_epoch
        + ints([2, 1])  # isr
        + i32(27)  # partition_epoch
        + ints([1, 2, 3])  # replicas
        + ints([3])  # adding_replicas (v3+)
        + ints([])  # removing_replicas (v3+)
        + boolean(True)  # is_new (v1+)
    )
    if version >= 6:
        out += i8(1)  # leader_recovery_state
    return out + NO_TAGS


@pytest.mark.parametrize("version", [5, 6, 7])
def test_leader_and_isr_request_bytes(version: int) -> None:
    cls = request_class(4, version)
    mod = inter_broker.request_schema(4, version)
    assert cls is mod
    module = __import__(cls.__module__, fromlist=["x"])
    extra = {"leader_recovery_state": 1} if version >= 6 else {}
    part = module.LeaderAndIsrPartitionState(
        partition_index=3,
        controller_epoch=9,
        leader=2,
        leader_epoch=14,
        isr=(2, 1),
        partition_epoch=27,
        replicas=(1, 2, 3),
        adding_replicas=(3,),
        removing_replicas=(),
        is_new=True,
        **extra,
    )
    topic = module.LeaderAndIsrTopicState(
        topic_name="orders", topic_id=TOPIC_ID, partition_states=(part,)
    )
    live = module.LeaderAndIsrLiveLeader(broker_id=2, host_name="b2.local", port=9093)
    kraft = {"is_k_raft_controller": False} if version >= 7 else {}
    obj = cls(
        controller_id=1,
        controller_epoch=9,
        broker_epoch=4242,
        type_=1,
        topic_states=(topic,),
        live_leaders=(live,),
        **kraft,
    )
    expected = (
        i32(1)
        + (boolean(False) if version >= 7 else b"")
        + i32(9)
        + i64(4242)
        + i8(1)
        + carr([cstr("orders") + TOPIC_ID.bytes + carr([_lai_partition_bytes(version)]) + NO_TAGS])
        + carr([i32(2) + cstr("b2.local") + i32(9093) + NO_TAGS])
        + NO_TAGS
    )
    roundtrip(cls, obj, expected)


@pytest.mark.parametrize("version", [5, 6, 7])
def test_leader_and_isr_response_bytes(version: int) -> None:
    cls = response_class(4, version)
    module = __import__(cls.__module__, fromlist=["x"])
    obj = cls(
        error_code=ErrorCode(0),
        topics=(
            module.LeaderAndIsrTopicError(
                topic_id=TOPIC_ID,
                partition_errors=(
                    module.LeaderAndIsrPartitionError(partition_index=0, error_code=ErrorCode(0)),
                    module.LeaderAndIsrPartitionError(partition_index=1, error_code=ErrorCode(11)),
                ),
            ),
        ),
    )
    partitions = carr([i32(0) + i16(0) + NO_TAGS, i32(1) + i16(11) + NO_TAGS])
    expected = i16(0) + carr([TOPIC_ID.bytes + partitions + NO_TAGS]) + NO_TAGS
    roundtrip(cls, obj, expected)


# --- StopReplica ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 4])
def test_stop_replica_bytes(version: int) -> None:
    cls = request_class(5, version)
    module = __import__(cls.__module__, fromlist=["x"])
    kraft = {"is_k_raft_controller": True} if version >= 4 else {}
    obj = cls(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=77,
        topic_states=(
            module.StopReplicaTopicState(
                topic_name="t",
                partition_states=(
                    module.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=-2, delete_partition=True
                    ),
                    module.StopReplicaPartitionState(
                        partition_index=5, leader_epoch=8, delete_partition=False
                    ),
                ),
            ),
        ),
        **kraft,
    )
    parts = carr(
        [
            i32(0) + i32(-2) + boolean(True) + NO_TAGS,
            i32(5) + i32(8) + boolean(False) + NO_TAGS,
        ]
    )
    expected = (
        i32(1)
        + (boolean(True) if version >= 4 else b"")
        + i32(3)
        + i64(77)
        + carr([cstr("t") + parts + NO_TAGS])
        + NO_TAGS
    )
    roundtrip(cls, obj, expected)
    rcls = response_class(5, version)
    rmod = __import__(rcls.__module__, fromlist=["x"])
    robj = rcls(
        error_code=ErrorCode(0),
        partition_errors=(
            rmod.StopReplicaPartitionError(
                topic_name="t", partition_index=5, error_code=ErrorCode(74)
            ),
        ),
    )
    roundtrip(rcls, robj, i16(0) + carr([cstr("t") + i32(5) + i16(74) + NO_TAGS]) + NO_TAGS)


# --- UpdateMetadata -------------------------------------------------------------------------


def _um_object(version: int, rack: str | None) -> object:
    cls = request_class(6, version)
    module = __import__(cls.__module__, fromlist=["x"])
    part = module.UpdateMetadataPartitionState(
        partition_index=1,
        controller_epoch=4,
        leader=-1,
        leader_epoch=6,
        isr=(3,),
        zk_version=12,
        replicas=(3, 1),
        offline_replicas=(1,),
    )
    broker = module.UpdateMetadataBroker(
        id_=3,
        endpoints=(
            module.UpdateMetadataEndpoint(
                port=19092, host="10.0.0.3", listener="REPLICATION", security_protocol=0
            ),
        ),
        rack=rack,
    )
    kraft = {"is_k_raft_controller": False} if version >= 8 else {}
    return cls(
        controller_id=2,
        controller_epoch=4,
        broker_epoch=-1,
        topic_states=(
            module.UpdateMetadataTopicState(
                topic_name="orders", topic_id=TOPIC_ID, partition_states=(part,)
            ),
        ),
        live_brokers=(broker,),
        **kraft,
    )


def _um_bytes(version: int, rack: str | None, tags: bytes = NO_TAGS) -> bytes:
    part = (
        i32(1)
        + i32(4)
        + i32(-1)
        + i32(6)
        + ints([3])
        + i32(12)
        + ints([3, 1])
        + ints([1])
        + NO_TAGS
    )
    endpoint = i32(19092) + cstr("10.0.0.3") + cstr("REPLICATION") + i16(0) + NO_TAGS
    broker = i32(3) + carr([endpoint]) + cstr(rack) + NO_TAGS
    return (
        i32(2)
        + (boolean(False) if version >= 8 else b"")
        + i32(4)
        + i64(-1)
        + carr([cstr("orders") + TOPIC_ID.bytes + carr([part]) + NO_TAGS])
        + carr([broker])
        + tags
    )


@pytest.mark.parametrize("version", [7, 8])
@pytest.mark.parametrize("rack", ["rack-a", None])
def test_update_metadata_bytes(version: int, rack: str | None) -> None:
    roundtrip(request_class(6, version), _um_object(version, rack), _um_bytes(version, rack))
    rcls = response_class(6, version)
    roundtrip(rcls, rcls(error_code=ErrorCode(0)), i16(0) + NO_TAGS)


def test_update_metadata_v8_tagged_type() -> None:
    """Kafka 3.7+ controllers may send the tagged Type (tag 0) in v8: read, not refused."""
    cls = request_class(6, 8)
    tags = uvarint(1) + uvarint(0) + uvarint(1) + i8(2)  # one tag: tag 0, size 1, value 2
    parsed, size = entity_reader(cls)(_um_bytes(8, None, tags), 0)
    assert size == len(_um_bytes(8, None, tags))
    assert parsed.type_ == 2
    assert parsed.live_brokers[0].rack is None
    buf = io.BytesIO()
    entity_writer(cls)(buf, parsed)
    assert buf.getvalue() == _um_bytes(8, None, tags)


# --- ControlledShutdown ---------------------------------------------------------------------


def test_controlled_shutdown_bytes() -> None:
    cls = request_class(7, 3)
    roundtrip(
        cls, cls(broker_id=2, broker_epoch=1234567890123), i32(2) + i64(1234567890123) + NO_TAGS
    )
    rcls = response_class(7, 3)
    rmod = __import__(rcls.__module__, fromlist=["x"])
    robj = rcls(
        error_code=ErrorCode(0),
        remaining_partitions=(rmod.RemainingPartition(topic_name="t", partition_index=4),),
    )
    roundtrip(rcls, robj, i16(0) + carr([cstr("t") + i32(4) + NO_TAGS]) + NO_TAGS)


# --- whole frames through the broker's codec ------------------------------------------------


def test_frames_through_codec() -> None:
    body = _um_bytes(8, "r1")
    header = i16(6) + i16(8) + i32(99) + i16(len(b"ctl")) + b"ctl" + NO_TAGS  # header v2
    hdr, req = decode_request(header + body)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (6, 8, 99, "ctl")
    assert req == _um_object(8, "r1")
    rcls = response_class(6, 8)
    frame = encode_response(99, rcls(error_code=ErrorCode(11)))
    # size, response header v1 (correlation id + empty tags), error code, empty tags
    assert frame == i32(8) + i32(99) + NO_TAGS + i16(11) + NO_TAGS


def test_versions_not_held_are_unsupported() -> None:
    for key, (low, high) in inter_broker.VERSIONS.items():
        assert request_class(key, high).__version__ == high
        assert response_class(key, low).__api_key__ == key
        with pytest.raises(UnsupportedVersionError):
            request_class(key, high + 1)
        if low > 0:
            with pytest.raises(UnsupportedVersionError):
                request_class(key, low - 1)
