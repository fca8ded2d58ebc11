"""Regular-expression subscriptions of consumer groups (KIP-848), resolved with RE2 as
Kafka does.

Kafka resolves a group's new regex asynchronously: the heartbeat that brings it computes the
target without it (a literal topic subscribed alongside is assigned at once) and the matches
follow once it is resolved. Here a regex new to its group is resolved at the group's next
heartbeat; one the group already uses, and every regex after a load, counts at once.
RE2 is imported by the first regex to compile: a broker whose groups subscribe by name
never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.consumer.records import TopicMetadata

if TYPE_CHECKING:
    import re2


class InvalidRegex(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode.INVALID_REGULAR_EXPRESSION


class RegexResolver:
    def __init__(self) -> None:
        self._compiled: dict[str, re2._Regexp] = {}
        self._matches: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._pending: dict[str, set[str]] = {}  # group id -> regexes not resolved yet

    def compile(self, pattern: str) -> re2._Regexp:
        compiled = self._compiled.get(pattern)
        if compiled is None:
            import re2

            try:
                compiled = re2.compile(pattern)
            except re2.error as exc:
                raise InvalidRegex(f"SubscribedTopicRegex {pattern!r} is invalid: {exc}"
                                   ) from None
            self._compiled[pattern] = compiled
        return compiled

    def matching(self, group_id: str, pattern: str,
                 topics: Mapping[str, TopicMetadata]) -> frozenset[str]:
        """The non-internal topics the regex matches (nothing while it is being resolved),
        computed once per pattern and set of topics (every heartbeat of every member
        asks)."""
        if not pattern or pattern in self._pending.get(group_id, ()):
            return frozenset()
        names = frozenset(topics)
        cached = self._matches.get(pattern)
        if cached is not None and cached[0] == names:
            return cached[1]
        regex = self.compile(pattern)
        found = frozenset(t for t in names
                          if not t.startswith("__") and regex.fullmatch(t) is not None)
        self._matches[pattern] = (names, found)
        return found

    def resolve_pending(self, group_id: str) -> None:
        """A later heartbeat of the group: the regexes it waited for count from now on."""
        self._pending.pop(group_id, None)

    def defer_if_new(self, group_id: str, pattern: str | None, old: str | None,
                     in_use: Iterable[str | None]) -> None:
        """A member subscribes to ``pattern`` (was ``old``): if no other member of the group
        uses it, it is resolved later."""
        if pattern and pattern != old and pattern not in set(in_use):
            self._pending.setdefault(group_id, set()).add(pattern)
