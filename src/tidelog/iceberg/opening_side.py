"""The table side of a broker whose catalog could not be opened as it started (unreachable,
locked, not there yet): each call opens it first, until one succeeds, then goes to the side
it opened. A call that cannot open it fails as a flush fails while the catalog is
unreachable: translation pauses and says why, the lag grows, producers go on, and retention
keeps every record of the topic (its floor is the table's offset, 0 before the table has
been read). Without it the broker would not start at all while its catalog is out, and in a
cluster a catalog outage during a restart would take the restarted brokers down."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .maintenance import Expired
from .table_writer import FlushResult, PartitionRead, Position, TopicSettings
from .translator import TableSide


class OpeningSide:
    def __init__(self, open_side: Callable[[], TableSide], namespace: str,
                 in_process: bool) -> None:
        self._open_side = open_side
        self.namespace = namespace
        self.in_process = in_process
        self.opened: TableSide | None = None
        self._lock = threading.Lock()

    def side(self) -> TableSide:
        """The opened side, opening it now if no call has yet (its error propagates)."""
        with self._lock:
            if self.opened is None:
                self.opened = self._open_side()
            return self.opened

    def where(self, settings: TopicSettings, epochs: dict[int, int]) -> Position:
        return self.side().where(settings, epochs)

    def write(self, settings: TopicSettings, reads: list[PartitionRead]) -> FlushResult:
        return self.side().write(settings, reads)

    def maintain(self, settings: TopicSettings, now_ms: int, orphan_age_ms: int) -> Expired:
        return self.side().maintain(settings, now_ms, orphan_age_ms)

    def drop(self, name: str, dlq_name: str) -> None:
        self.side().drop(name, dlq_name)

    def identifier(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def close(self) -> None:
        with self._lock:
            opened = self.opened
        if opened is not None:
            opened.close()
