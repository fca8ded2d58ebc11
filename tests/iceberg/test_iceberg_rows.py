"""A flush's rows from several partitions (``merge`` keeps each partition's groups, the
table's rows are built group by group): whatever the partitions hold (values of two schema
versions, values that do not decode, unframed values, tombstones), the table has every
decodable record once, in partition then offset order, with the reference's values, and
every other record is a DLQ row with its reason."""

from __future__ import annotations

import io
import json
import os
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog._native import core
from tidelog.iceberg import rows as rows_module
from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.rows import (
    NOT_FRAMED,
    TOMBSTONE,
    RecordSorter,
    batch_of,
    in_order,
    merge,
    table_rows,
)
from tidelog.iceberg.schemas import Codecs
from tidelog.records import Record
from tidelog.schema_registry.records import SchemaValue
from tidelog.schema_registry.schema_types import ParsedSchema, parse_schema

V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                 {"name": "s", "type": "string"}]}
V2 = {"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "long"}, {"name": "s", "type": "string"},
    {"name": "b", "type": ["null", "double"], "default": None}]}
SCHEMAS = {3: V1, 9: V2}


class _Source:
    def may_lag(self, schema_id: int) -> bool:
        return False

    def by_id(self, schema_id: int) -> SchemaValue | None:
        schema = SCHEMAS.get(schema_id)
        return None if schema is None else SchemaValue("t-value", schema_id, schema_id,
                                                       json.dumps(schema))

    def latest(self, subject: str) -> SchemaValue | None:
        return self.by_id(9)

    def parse(self, value: SchemaValue) -> ParsedSchema:
        return parse_schema(value.schema_type, value.schema, value.references, None)


def _framed(schema_id: int, value: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMAS[schema_id]), value)
    return struct.pack(">bI", 0, schema_id) + buf.getvalue()


_VALUE = st.one_of(
    st.tuples(st.just(3), st.integers(-2**40, 2**40), st.text(max_size=4)),
    st.tuples(st.just(9), st.integers(-2**40, 2**40), st.text(max_size=4),
              st.one_of(st.none(), st.floats(-1e6, 1e6))),
    st.just("cut"), st.just("unframed"), st.just("unknown"), st.none())


def _record(offset: int, drawn: Any) -> tuple[Record, dict[str, Any] | str]:
    """A record and what the flush must make of it: its row's values, or its DLQ reason
    (a prefix of it)."""
    if drawn is None:
        return Record(offset, 1_000 + offset, None, None, []), TOMBSTONE
    if drawn == "cut":  # a framed V1 value cut short: fastavro cannot read it
        return Record(offset, 1_000 + offset, None, _framed(3, {"a": 2**40, "s": "xy"})[:-2],
                      []), ""
    if drawn == "unframed":
        return Record(offset, 1_000 + offset, None, b"\x01junk", []), NOT_FRAMED
    if drawn == "unknown":
        return Record(offset, 1_000 + offset, None, struct.pack(">bI", 0, 5) + b"\x02",
                      []), "unknown schema id 5"
    value = {"a": drawn[1], "s": drawn[2]}
    if drawn[0] == 9:
        value["b"] = drawn[3]
    row = {"a": drawn[1], "s": drawn[2], "b": drawn[3] if drawn[0] == 9 else None}
    return Record(offset, 1_000 + offset, b"k", _framed(drawn[0], value), []), row


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.lists(_VALUE, max_size=12)), min_size=1,
                max_size=4))
def test_rows_of_several_partitions_in_order_with_their_dlq(
        partitions: list[tuple[int, list[Any]]]) -> None:
    sorter = RecordSorter("t", "value_schema_id_prefix", Codecs(_Source()))
    parts, want = [], []
    for p, (first, drawn) in enumerate(partitions):
        records = [_record(first + i, d) for i, d in enumerate(drawn)]
        want.extend((p, r.offset, outcome) for r, outcome in records)
        parts.append(sorter.sort(p, batch_of([r for r, _ in records]), first,
                                 first + len(records)))
    merged = merge(parts)
    table = table_rows(merged, table_schema(sorter.codecs.plain(9).fields))
    assert len(merged) == len(want)
    rows = table.to_pylist()
    kept = [(p, o, outcome) for p, o, outcome in want if isinstance(outcome, dict)]
    assert [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows] == [
        (p, o) for p, o, _ in kept]
    assert [{k: r[k] for k in ("a", "s", "b")} for r in rows] == [o for _, _, o in kept]
    dlq = {i: (p, reason) for i, (p, _, reason) in enumerate(want) if isinstance(reason, str)}
    assert set(merged.dlq) == set(dlq)
    for i, (_, reason) in dlq.items():
        assert merged.dlq[i].startswith(reason), (merged.dlq[i], reason)


@pytest.mark.parametrize(("groups", "want"), [
    ([], True),
    ([[0, 1, 2], [3, 4]], True),  # one group a partition, in turn
    ([[], [5], [], [6, 7]], True),  # groups left empty (every row to the DLQ)
    ([[0, 2], [1, 3]], False),  # two schema ids interleaved in one partition
    ([[3], [1]], False),
    ([[1], [1]], False),
])
def test_groups_in_order(groups: list[list[int]], want: bool) -> None:
    assert in_order([np.array(g, np.int64) for g in groups]) is want


_FRAMED = st.one_of(
    st.none(), st.binary(max_size=7),
    st.builds(lambda magic, schema_id, rest: bytes([magic]) + struct.pack(">I", schema_id) + rest,
              st.sampled_from([0, 0, 0, 1]), st.sampled_from([1, 7, 2**31 + 3, 2**32 - 1]),
              st.binary(max_size=4)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_FRAMED, max_size=40), st.integers(0, 5), st.data())
def test_the_native_schema_id_scan_answers_as_its_twin(values: list[bytes | None], start: int,
                                                        data: st.DataObject) -> None:
    """The native core's ``schema_ids`` gives the ids and framed flags of the numpy twin, on
    slices of arrays with nulls, short values and other magic bytes, and whether the framed
    values carry no id, one, or more than one."""
    if core is None:
        if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it
            pytest.fail("the native core is not built")
        pytest.skip("the native core is not built")
    array = pa.array([None, *values], pa.binary()).slice(min(start, len(values)))
    present = ~np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    present &= np.array(data.draw(st.lists(st.booleans(), min_size=len(array),
                                           max_size=len(array))), dtype=bool)
    ids, framed = rows_module.schema_ids(array, present)
    got_ids, got_framed, distinct = rows_module._schema_ids(array, present)
    assert got_framed.tolist() == framed.tolist()
    assert got_ids.tolist() == ids.tolist()
    assert distinct == min(2, len(set(ids[framed].tolist())))
    grouped = rows_module._by_id(got_ids, got_framed, distinct)
    assert sorted(r for _, rows in grouped for r in rows.tolist()) == np.flatnonzero(
        framed).tolist()
    assert [i for i, _ in grouped] == list(dict.fromkeys(ids[framed].tolist()))


def test_the_twin_scan_counts_distinct_ids_as_the_native_one(monkeypatch: Any) -> None:
    """Without the native core, ``_schema_ids`` counts the framed values' ids itself."""
    monkeypatch.setattr(rows_module, "core", None)
    array = pa.array([_framed(3, {"a": 1, "s": ""}), b"\x01junk", None,
                      _framed(9, {"a": 1, "s": ""}), _framed(3, {"a": 1, "s": ""})])
    present = np.array([True, True, False, True, True])
    ids, framed, distinct = rows_module._schema_ids(array, present)
    assert framed.tolist() == [True, False, False, True, True] and distinct == 2
    assert [(i, r.tolist()) for i, r in rows_module._by_id(ids, framed, distinct)] == [
        (3, [0, 4]), (9, [3])]
    assert rows_module._schema_ids(array.slice(0, 1), present[:1])[2] == 1
    assert rows_module._schema_ids(array.slice(1, 2), present[1:3])[2] == 0
