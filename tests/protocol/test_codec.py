"""Request decoding: headers by hand, bodies through kio; every malformed frame raises
InvalidRequestError (never anything else), and trailing bytes are ignored."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from tidelog.protocol.codec import (
    InvalidRequestError,
    UnsupportedVersionError,
    api_versions_fallback,
    decode_request,
    parse_header,
    request_class,
)
from tidelog.protocol.kio_util import make, ms, nested
from tidelog.records import build_batch

ADVERTISED = {
    0: (3, 10),
    1: (4, 12),
    2: (1, 7),
    3: (0, 12),
    18: (0, 4),
    19: (2, 7),
    20: (1, 6),
    21: (0, 2),
    22: (0, 4),
    32: (1, 4),
    33: (0, 2),
    37: (0, 3),
    44: (0, 1),
    60: (0, 1),
}


def _frame(api_key: int, version: int, body: object, client_id: str | None = "c") -> bytes:
    cls = request_class(api_key, version)
    hdr = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr)(
        buf,
        hdr(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=42,
            client_id=client_id,
        ),
    )
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def test_produce_records_stay_bytes() -> None:
    batch = build_batch([(1, b"k", b"v")])
    cls = request_class(0, 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    body = make(
        cls,
        transactional_id=None,
        acks=-1,
        timeout=1500,
        topic_data=(make(tcls, name="t", partition_data=(make(pcls, index=0, records=batch),)),),
    )
    header, req = decode_request(_frame(0, 9, body))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        0,
        9,
        42,
        "c",
    )
    assert req.topic_data[0].partition_data[0].records == batch
    assert ms(req.timeout) == 1500


def test_null_client_id_and_header_tags_are_skipped() -> None:
    body = make(request_class(18, 3), client_software_name="x", client_software_version="1")
    frame = bytearray(_frame(18, 3, body, client_id=None))
    # header v2: key(2) version(2) corr(4) client_id(-1: 2 bytes) then tag count 0 -> add a tag
    assert frame[10] == 0
    frame[10:11] = bytes([1, 7, 2, 0xAA, 0xBB])  # one unknown tag (7) of 2 bytes
    header, req = decode_request(bytes(frame))
    assert header.client_id is None and req.client_software_name == "x"


def test_trailing_bytes_are_ignored() -> None:
    body = make(
        request_class(3, 12),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    _, req = decode_request(_frame(3, 12, body) + b"\x00\x00\x00")
    assert req.topics is None


def test_unsupported_version_and_unknown_key() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_request(struct.pack(">hhih", 18, 99, 1, -1))
    with pytest.raises(InvalidRequestError):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_kip511_fallback_bytes() -> None:
    assert api_versions_fallback(7, 0, 4) == struct.pack(">iihihhh", 16, 7, 35, 1, 18, 0, 4)


def test_truncated_header() -> None:
    with pytest.raises(InvalidRequestError):
        parse_header(struct.pack(">hhih", 18, 3, 1, 10) + b"abc", 2)


@settings(max_examples=300, deadline=None)
@given(
    key_version=st.sampled_from(
        [(k, v) for k, (lo, hi) in ADVERTISED.items() for v in range(lo, hi + 1)]
    ),
    tail=st.binary(max_size=200),
)
def test_random_bodies_raise_only_invalid_request(
    key_version: tuple[int, int], tail: bytes
) -> None:
    key, version = key_version
    frame = struct.pack(">hhih", key, version, 1, 1) + b"c"
    if request_class(key, version).__header_schema__.__version__ >= 2:
        frame += b"\x00"
    try:
        decode_request(frame + tail)
    except InvalidRequestError:
        pass


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(min_value=0, max_value=200))
def test_every_truncation_of_a_real_request_is_rejected_cleanly(cut: int) -> None:
    batch = build_batch([(1, b"k", b"v" * 50)])
    cls = request_class(0, 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    body = make(
        cls,
        transactional_id=None,
        acks=1,
        timeout=1000,
        topic_data=(
            make(tcls, name="topic", partition_data=(make(pcls, index=0, records=batch),)),
        ),
    )
    frame = _frame(0, 9, body)
    cut = min(cut, len(frame) - 1)
    with pytest.raises(InvalidRequestError):
        decode_request(frame[:cut])


def _produce_v9_frame() -> tuple[bytes, bytes]:
    batch = build_batch([(1, b"k", b"v")])
    cls = request_class(0, 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    body = make(
        cls,
        transactional_id=None,
        acks=1,
        timeout=1000,
        topic_data=(make(tcls, name="t", partition_data=(make(pcls, index=3, records=batch),)),),
    )
    return _frame(0, 9, body), batch


def test_unknown_tagged_fields_in_the_body_are_ignored() -> None:
    """KIP-482: a receiver skips tags it does not know (kio itself raises KeyError)."""
    frame, batch = _produce_v9_frame()
    # the frame ends with: partition tags (0), topic tags (0), request tags (0)
    assert frame[-3:] == b"\x00\x00\x00"
    unknown = bytes([2, 40, 3, 1, 2, 3, 41, 0])  # 2 tags: #40 (3 bytes), #41 (empty)
    tampered = frame[:-3] + unknown + b"\x00" + unknown
    header, req = decode_request(tampered)
    assert header.correlation_id == 42
    assert req.topic_data[0].partition_data[0].index == 3
    assert req.topic_data[0].partition_data[0].records == batch


def test_unknown_tag_overrunning_the_frame_is_rejected() -> None:
    frame, _ = _produce_v9_frame()
    with pytest.raises(InvalidRequestError):
        decode_request(frame[:-1] + bytes([1, 40, 100, 1]))
