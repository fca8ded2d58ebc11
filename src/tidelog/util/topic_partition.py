"""TopicPartition and Kafka's partition-directory naming rules."""

from __future__ import annotations

import re
import uuid
from typing import NamedTuple

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_SUFFIX_RE = re.compile(r"^(.*)\.([0-9a-f]{32})(-delete|-future|-stray)$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_topic_partition_name(name: str) -> TopicPartition:
    """Parse ``<topic>-<partition>`` or its ``.<uuid>-delete|-future|-stray`` forms."""
    base = name
    m = _SUFFIX_RE.match(name)
    if m:
        base = m.group(1)
    idx = base.rfind("-")
    if idx <= 0 or idx == len(base) - 1:
        raise ValueError(f"not a topic-partition directory name: {name!r}")
    topic, part = base[:idx], base[idx + 1 :]
    if not part.isdigit():
        raise ValueError(f"not a topic-partition directory name: {name!r}")
    return TopicPartition(topic, int(part))


def delete_dir_name(tp: TopicPartition, suffix: str = DELETE_DIR_SUFFIX) -> str:
    """``<topic>-<partition>.<uuid><suffix>``, topic truncated so the name is <= 255 chars."""
    tail = f"-{tp.partition}.{uuid.uuid4().hex}{suffix}"
    topic = tp.topic[: max(0, 255 - len(tail))]
    return f"{topic}{tail}"


def validate_topic_name(topic: str) -> None:
    if not topic:
        raise ValueError("topic name is empty")
    if topic in (".", ".."):
        raise ValueError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.match(topic):
        raise ValueError(f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]")
