"""Log compaction (Kafka's LogCleaner, LogCleanerManager, Cleaner, SkimpyOffsetMap)."""

from .cleaner import Cleaner, CleanerStats, LogCleaningAbortedError, LogToClean
from .config import CLEANER_CONFIG_DEF, CleanerConfig
from .log_cleaner import LogCleaner
from .manager import LogCleanerManager
from .offset_map import SkimpyOffsetMap

__all__ = [
    "CLEANER_CONFIG_DEF",
    "Cleaner",
    "CleanerConfig",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "LogCleaningAbortedError",
    "LogToClean",
    "SkimpyOffsetMap",
]
