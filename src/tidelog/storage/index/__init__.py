"""Kafka's segment indexes: `.index` (OffsetIndex), `.timeindex` (TimeIndex), `.txnindex`."""

from .offset_index import OffsetIndex, OffsetPosition
from .time_index import TimeIndex, TimestampOffset
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = [
    "AbortedTxn",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
]
