"""TransactionIndex: Kafka's behaviours #19-#22 (TransactionIndexTest)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tidelog.storage.errors import CorruptIndexError
from tidelog.storage.index.txn_index import AbortedTxn, TransactionIndex

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40)]


def test_lazy_creation_and_positioned_at_end(tmp_path: Path) -> None:  # 22
    p = tmp_path / "0.txnindex"
    idx = TransactionIndex(0, p)
    assert not p.exists() and idx.all_aborted_txns() == []
    for t in TXNS[:2]:
        idx.append(t)
    idx.close()
    assert p.stat().st_size == 2 * 34
    assert struct.unpack(">hqqqq", p.read_bytes()[:34]) == (0, 0, 0, 10, 11)
    again = TransactionIndex(0, p)
    again.append(TXNS[2])
    assert again.all_aborted_txns() == TXNS[:3]
    with pytest.raises(ValueError):
        again.append(AbortedTxn(9, 0, 35, 0))  # last offset must increase
    again.close()


def test_last_offset_must_increase(tmp_path: Path) -> None:  # 19
    idx = TransactionIndex(0, tmp_path / "x.txnindex")
    idx.append(AbortedTxn(1, 0, 15, 11))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(0, 0, 10, 11))
    idx.close()


def test_collect_aborted_transactions(tmp_path: Path) -> None:  # 20
    idx = TransactionIndex(0, tmp_path / "c.txnindex")
    for t in TXNS:
        idx.append(t)

    def q(f: int, u: int) -> tuple[list[int], bool]:
        r = idx.collect_aborted_txns(f, u)
        return [t.producer_id for t in r.aborted_transactions], r.is_complete

    assert q(0, 100) == ([0, 1, 2, 3], False)
    assert q(0, 32) == ([0, 1, 2], True)
    assert q(0, 35) == ([0, 1, 2, 3], True)
    assert q(11, 35) == ([1, 2, 3], True)
    assert q(20, 41) == ([2, 3], False)
    idx.close()


def test_truncate_and_reset(tmp_path: Path) -> None:  # 21
    idx = TransactionIndex(0, tmp_path / "t.txnindex")
    for t in TXNS:
        idx.append(t)
    idx.truncate_to(51)
    assert idx.all_aborted_txns() == TXNS
    idx.truncate_to(50)
    assert idx.all_aborted_txns() == TXNS[:3]
    idx.append(AbortedTxn(3, 32, 50, 40))  # the last offset is back at 35
    idx.reset()
    assert idx.all_aborted_txns() == []
    idx.close()


def test_sanity_check(tmp_path: Path) -> None:  # 22
    p = tmp_path / "s.txnindex"
    idx = TransactionIndex(0, p)
    for t in TXNS:
        idx.append(t)
    idx.close()
    TransactionIndex(0, p).sanity_check()
    bad = TransactionIndex(20, p)
    with pytest.raises(CorruptIndexError):
        bad.sanity_check()
    bad.close()
