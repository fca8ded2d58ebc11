"""``__transaction_state`` records: Kafka's TransactionLogKey/Value bytes."""

from __future__ import annotations

import struct

import pytest

from tidelog.server.coordinator.transaction.records import (
    TransactionLogValue,
    TxnSchemaError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    format_record,
    partition_for,
)


def test_key_is_version_0_and_a_short_string() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("héllo")) == "héllo"
    with pytest.raises(TxnSchemaError):
        decode_key(b"\x00\x01\x00\x02tx")


def test_value_v0_layout_matches_kafkas_schema() -> None:
    v = TransactionLogValue(7, 3, 60000, 1, {"a": [0, 2]}, 111, 100)
    raw = encode_value(v)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 1) + struct.pack(">i", 1)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">qq", 111, 100))
    assert raw == expected
    assert decode_value(raw) == v


def test_value_v1_flexible_with_tagged_fields_round_trips() -> None:
    v = TransactionLogValue(7, 3, 60000, 4, {}, 111, 100, previous_producer_id=5,
                            next_producer_id=9, client_transaction_version=2)
    assert decode_value(encode_value(v, version=1)) == v
    empty = TransactionLogValue(7, 3, 60000, 0, None, 1, -1)
    assert decode_value(encode_value(empty, version=1)) == empty
    assert decode_value(encode_value(empty)) == empty


def test_truncated_value_is_a_schema_error() -> None:
    with pytest.raises(TxnSchemaError):
        decode_value(encode_value(TransactionLogValue(1, 0, 1, 1, {"t": [1]}, 0, 0))[:-3])


def test_partition_uses_javas_string_hash() -> None:
    # "tx".hashCode() == 116 * 31 + 120 == 3716
    assert partition_for("tx", 50) == 3716 % 50 == 16


def test_formatter_names_the_state() -> None:
    k, v = format_record(encode_key("tx"), encode_value(
        TransactionLogValue(7, 3, 60000, 2, {"a": [0]}, 5, 1)))
    assert k == "transaction_metadata::transactionalId=tx"
    assert "state=PrepareCommit" in v and "partitions=[a-0]" in v
    assert format_record(encode_key("tx"), None)[1] == "<DELETE>"
