"""The LogManager's partition map, counting logs per log dir as it changes.

Choosing a dir for a new partition (the least-loaded one, as Kafka's nextLogDirs) scanned
every log: a 2000-partition CreateTopics did that 2000 times. Kept here incrementally, the
choice costs one look at each dir.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidelog.storage.log import Log
from tidelog.util.topic_partition import TopicPartition

_MISSING: Any = object()


class LogsByDir(dict[TopicPartition, Log]):
    """``tp -> Log`` that keeps ``count(parent dir)``. Only ``[]=``, ``del``, ``pop`` and
    ``clear`` change it (the LogManager uses nothing else). The parent is taken when a log
    is stored: a log renamed in place (to ``-delete``) keeps its parent."""

    def __init__(self) -> None:
        super().__init__()
        self._parent: dict[TopicPartition, Path] = {}
        self.counts: Counter[Path] = Counter()
        self.on_store: Callable[[Log], object] | None = None  # each log as it is stored
        # counts every change: a reader that saw this number and finds it unchanged knows
        # no log was stored or removed since (ReplicaManager.get_partition)
        self.version = 0

    def __setitem__(self, tp: TopicPartition, lg: Log) -> None:
        self._forget(tp)
        super().__setitem__(tp, lg)
        self.version += 1
        if self.on_store is not None:
            self.on_store(lg)
        parent = Path(lg.dir).parent
        self._parent[tp] = parent
        self.counts[parent] += 1

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        self.version += 1
        self._forget(tp)

    def pop(self, tp: TopicPartition, default: Any = _MISSING) -> Any:
        if tp not in self:
            if default is _MISSING:
                raise KeyError(tp)
            return default
        lg = super().pop(tp)
        self.version += 1
        self._forget(tp)
        return lg

    def clear(self) -> None:
        super().clear()
        self.version += 1
        self._parent.clear()
        self.counts.clear()

    def in_dir(self, parent: Path) -> list[Log]:
        """The logs stored under ``parent`` (their parents kept as stored: no path is
        taken apart per log)."""
        return [self[tp] for tp, p in self._parent.items() if p == parent]

    def _forget(self, tp: TopicPartition) -> None:
        parent = self._parent.pop(tp, None)
        if parent is not None:
            self.counts[parent] -= 1
