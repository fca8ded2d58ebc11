"""Produce frames of PRODUCE_IN_PLACE bytes and more are read into a buffer of their own and
decoded in place (server/connection.py): whether the frame arrives in one piece, dribbled,
or followed by a pipelined request in the same segment, the records land byte for byte and
a corrupt batch is still refused with CORRUPT_MESSAGE."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, fetch_body, produce_body, recv_frame, request_frame

from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.server.connection import LARGE_FRAME, PRODUCE_IN_PLACE
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"auto.create.topics.enable": "true"}) as b:
        yield b


def _batch(n: int = 400) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(now, None, os.urandom(250)) for _ in range(n)])


def _send(w: Wire, frame: bytes, how: str) -> None:
    if how == "whole":
        w.sock.sendall(frame)
    else:  # the size and API key split across writes, then small pieces
        w.sock.sendall(frame[:5])
        for i in range(5, len(frame), 1000):
            w.sock.sendall(frame[i : i + 1000])


@pytest.mark.parametrize("how", ["whole", "dribbled"])
def test_in_place_frames_land_byte_for_byte(broker: EmbeddedBroker, how: str) -> None:
    topic = f"inplace-{how}"
    batch = _batch()
    with Wire(broker) as w:
        frame = request_frame(0, 9, 1, body=produce_body(9, topic, {0: batch}))
        assert PRODUCE_IN_PLACE <= len(frame) < LARGE_FRAME
        # a pipelined request after the produce, in the same write
        tail = request_frame(18, 3, 2, client_software_name="t", client_software_version="1")
        _send(w, frame + tail, how)
        resp: Any = w.recv(0, 9)
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
        assert w.recv(18, 3).error_code == 0  # type: ignore[attr-defined]
        fetched: Any = w.call(1, 12, body=fetch_body(12, topic, {0: 0}))
    records = bytes(fetched.responses[0].partitions[0].records)
    # the broker set the base offset and the leader epoch (both outside the CRC) and
    # touched nothing else
    assert len(records) == len(batch)
    assert records[8:12] == batch[8:12] and records[16:] == batch[16:]


def test_corrupt_in_place_frame_is_refused_and_the_connection_lives(
    broker: EmbeddedBroker,
) -> None:
    bad = bytearray(_batch())
    bad[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    with Wire(broker) as w:
        resp: Any = w.call(0, 9, body=produce_body(9, "inplace-bad", {0: bytes(bad)}))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.CORRUPT_MESSAGE
        w.sock.sendall(request_frame(18, 3, 9, client_software_name="t",
                                     client_software_version="1"))
        assert len(recv_frame(w.sock)) > 4
