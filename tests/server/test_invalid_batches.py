"""Error codes for bad batches, as Kafka 3.x answers them on the wire: INVALID_RECORD for an
old magic, a malformed record set and a batch that inflates past the decompression bound (a
"bomb"); CORRUPT_MESSAGE (retriable) only for a CRC mismatch."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body

from tidelog.records import CompressionType, build_batch
from tidelog.records.builder import assemble_batch
from tidelog.records.compression import MAX_DECOMPRESSED_BATCH
from tidelog.testing import EmbeddedBroker

INVALID_RECORD = 87
CORRUPT_MESSAGE = 2


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"auto.create.topics.enable": "true"}) as b:
        yield b


def _code(b: EmbeddedBroker, records: bytes) -> int:
    with Wire(b) as w:
        resp: Any = w.call(0, 9, body=produce_body(9, "bad", {0: records}, acks=1))
    return int(resp.responses[0].partition_responses[0].error_code)


def _good() -> bytes:
    return build_batch([(int(time.time() * 1000), None, b"v")])


def _bomb(inflated: int) -> bytes:
    """A gzip batch whose records inflate to ``inflated`` zero bytes (compressed ~1000x)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [z.compress(chunk) for _ in range(inflated >> 20)]
    payload = b"".join(parts) + z.flush()
    now = int(time.time() * 1000)
    return assemble_batch(
        base_offset=0, partition_leader_epoch=-1, attributes=int(CompressionType.GZIP),
        last_offset_delta=0, base_timestamp=now, max_timestamp=now, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, records_count=1, payload=payload,
    )


def test_a_good_batch_is_accepted(broker: EmbeddedBroker) -> None:
    assert _code(broker, _good()) == 0


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_invalid_record(broker: EmbeddedBroker, magic: int) -> None:
    data = bytearray(_good())
    data[16] = magic
    assert _code(broker, bytes(data)) == INVALID_RECORD


def test_truncated_record_set_is_invalid_record(broker: EmbeddedBroker) -> None:
    assert _code(broker, _good()[:-3]) == INVALID_RECORD


def test_crc_mismatch_is_corrupt_message(broker: EmbeddedBroker) -> None:
    data = bytearray(_good())
    data[-1] ^= 0xFF
    assert _code(broker, bytes(data)) == CORRUPT_MESSAGE


def test_decompression_bomb_is_invalid_record(broker: EmbeddedBroker) -> None:
    bomb = _bomb(MAX_DECOMPRESSED_BATCH + (16 << 20))
    assert len(bomb) < 1 << 20  # small on the wire, past the bound once inflated
    assert _code(broker, bomb) == INVALID_RECORD
    assert _code(broker, _good()) == 0  # and the broker carries on
