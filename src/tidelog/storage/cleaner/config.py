"""Broker-level log cleaner settings (Kafka's CleanerConfig), declared once on a ConfigDef.

Topic-level compaction keys (cleanup.policy, min.cleanable.dirty.ratio, min/max.compaction.lag.ms,
delete.retention.ms) live in ``config/log_config.py``; these are the broker-wide ones.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.config.core import INT_MAX, ConfigDef, at_least, between

DOUBLE_MAX = sys.float_info.max


def _build_def() -> ConfigDef:
    c = ConfigDef()
    c.define("log.cleaner.enable", "boolean", True,
             "Run the log cleaner for topics with cleanup.policy=compact.")
    c.define("log.cleaner.threads", "int", 1, "Number of background cleaner threads.",
             at_least(0))
    c.define("log.cleaner.dedupe.buffer.size", "long", 134217728,
             "Total memory for the cleaners' offset maps (split across threads).", at_least(0))
    c.define("log.cleaner.io.buffer.load.factor", "double", 0.9,
             "Fraction of the offset map's slots that may be filled.", between(0, 1))
    c.define("log.cleaner.io.buffer.size", "int", 524288,
             "Total memory for the cleaners' read and write buffers.", at_least(0))
    c.define("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX,
             "Cleaner I/O throttle: read + write bytes per second.")
    c.define("log.cleaner.backoff.ms", "long", 15000,
             "Sleep between cleaner rounds when no log needs cleaning.", at_least(0))
    return c


CLEANER_CONFIG_DEF: ConfigDef = _build_def()


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's CleanerConfig: the typed broker settings plus per-thread derived sizes."""

    enable_cleaner: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 134217728
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    max_io_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15000
    max_message_size: int = 1048588  # broker message.max.bytes; sizes the read buffer
    hash_algorithm: str = "MD5"

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None) -> CleanerConfig:
        """From broker properties (unknown names ignored: the broker config holds many)."""
        given = {k: v for k, v in (props or {}).items() if k in CLEANER_CONFIG_DEF}
        v = CLEANER_CONFIG_DEF.parse(given)
        max_msg = int((props or {}).get("message.max.bytes", 1048588))
        return cls(
            enable_cleaner=v["log.cleaner.enable"],
            num_threads=v["log.cleaner.threads"],
            dedupe_buffer_size=v["log.cleaner.dedupe.buffer.size"],
            dedupe_buffer_load_factor=v["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=v["log.cleaner.io.buffer.size"],
            max_io_bytes_per_second=v["log.cleaner.io.max.bytes.per.second"],
            backoff_ms=v["log.cleaner.backoff.ms"],
            max_message_size=max_msg,
        )

    @property
    def dedupe_buffer_size_per_thread(self) -> int:
        """Kafka: total / threads, capped at Int.MaxValue."""
        return min(self.dedupe_buffer_size // max(1, self.num_threads), INT_MAX)

    @property
    def io_buffer_size_per_thread(self) -> int:
        """Each thread gets half of its share for reading and half for writing."""
        return self.io_buffer_size // max(1, self.num_threads) // 2


def docs_markdown() -> str:
    return CLEANER_CONFIG_DEF.docs_markdown()
