"""LogCleaner: the broker-facing cleaner service (Kafka's LogCleaner + CleanerThread).

``LogCleaner(config, log_dirs, logs_provider, clock)``; ``startup()`` starts
``log.cleaner.threads`` threads that each loop: clean the filthiest compacted log, run
retention on compacted logs (#140), back off ``log.cleaner.backoff.ms`` when nothing was
cleaned. A log whose cleaning fails is marked uncleanable (with a log line) and the thread
goes on with the others. Tests drive ``clean_once()`` directly with a ManualClock.

The LogManager calls ``abort_cleaning(tp)`` before deleting a log,
``abort_and_pause_cleaning``/``resume_cleaning`` around truncation, and
``maybe_truncate_checkpoint`` after truncating a compacted log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.util.clock import SYSTEM_CLOCK, Clock
from tidelog.util.topic_partition import TopicPartition

from ..errors import KafkaStorageError
from .cleaner import (
    Cleaner,
    CleanerStats,
    LogCleaningAbortedError,
    LogToClean,
    ThreadShutdownError,
)
from .config import CleanerConfig
from .manager import LogCleanerManager, LogCleaningError, log_dir_of
from .offset_map import SkimpyOffsetMap
from .swap import FaultHook
from .throttler import Throttler

if TYPE_CHECKING:
    from ..log import Log

log = logging.getLogger(__name__)

LogsProvider = Callable[[], Mapping[TopicPartition, "Log"]]
# (log, error, what was being done) -> True if the error was a disk failure, now reported
# to the LogDirFailureChannel (its dir goes offline); the LogManager's maybe_handle_io_error
IoErrorHandler = Callable[["Log", BaseException, str], bool]


class LogCleaner:
    def __init__(
        self,
        config: CleanerConfig | Mapping[str, Any] | None,
        log_dirs: Iterable[Path],
        logs_provider: LogsProvider,
        clock: Clock = SYSTEM_CLOCK,
        *,
        fault: FaultHook | None = None,
        io_error_handler: IoErrorHandler | None = None,
    ) -> None:
        if not isinstance(config, CleanerConfig):
            config = CleanerConfig.from_props(config)
        self.config = config
        self.clock = clock
        self.manager = LogCleanerManager(log_dirs, logs_provider)
        # The rate is read on every check, so a reconfigure changes it at once (Kafka's
        # dynamic log.cleaner.io.max.bytes.per.second), even before the threads restart.
        self.throttler = Throttler(lambda: self.target_config.max_io_bytes_per_second, clock)
        self._lifecycle = threading.RLock()  # startup / shutdown / reconfigure, one at a time
        self._wanted: CleanerConfig | None = None  # set by reconfigure_later, not yet applied
        self.fault = fault
        self.io_error_handler = io_error_handler
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.cleaners: list[Cleaner] = []  # the running threads' cleaners (Kafka's cleaners)
        self._cleaner: Cleaner | None = None  # the one clean_once uses
        self.last_stats: dict[TopicPartition, CleanerStats] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def target_config(self) -> CleanerConfig:
        """The config being applied by reconfigure_later, else the current one."""
        return self._wanted or self.config

    def startup(self) -> None:
        with self._lifecycle:
            if not self.config.enable_cleaner:
                return
            self._stop.clear()
            for i in range(self.config.num_threads):
                cleaner = self._new_cleaner(i)
                self.cleaners.append(cleaner)
                t = threading.Thread(target=self._run, args=(cleaner,),
                                     name=f"kafka-log-cleaner-thread-{i}", daemon=True)
                self._threads.append(t)
                t.start()

    def shutdown(self) -> None:
        with self._lifecycle:
            self._stop.set()
            for t in self._threads:
                t.join()
            self._threads.clear()
            self.cleaners.clear()

    def reconfigure(self, config: CleanerConfig | Mapping[str, Any]) -> None:
        """Apply new broker cleaner settings (Kafka's LogCleaner.reconfigure): the throttle
        rate applies at once; running threads are stopped (a cleaning in progress is
        abandoned at its next check, as Kafka's shutdownCleaners) and as many as the new
        ``log.cleaner.threads`` started with the new sizes."""
        if not isinstance(config, CleanerConfig):
            config = CleanerConfig.from_props(config)
        with self._lifecycle:
            running = bool(self._threads)
            if running:
                self.shutdown()
            self.config = config
            self._cleaner = None  # clean_once gets a map of the new size
            if running:
                self.startup()

    def reconfigure_later(self, config: CleanerConfig) -> threading.Thread:
        """reconfigure() on a thread of its own (the broker calls it from its event loop,
        and stopping the threads waits for a throttled cleaner's sleep); the throttle rate
        applies at once, and of several pending configs the newest is applied."""
        self._wanted = config
        t = threading.Thread(target=self._apply_wanted, name="kafka-log-cleaner-reconfigure",
                             daemon=True)
        t.start()
        return t

    def _apply_wanted(self) -> None:
        with self._lifecycle:
            wanted = self._wanted
            if wanted is None:
                return
            self.reconfigure(wanted)
            if self._wanted is wanted:  # else a newer one is pending: its thread applies it
                self._wanted = None

    def validate_reconfiguration(self, config: CleanerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration: at least one thread, and at most half
        or double the current count in one step. Raises ValueError."""
        current = self.target_config.num_threads
        if config.num_threads < 1:
            raise ValueError("Log cleaner threads should be at least 1")
        if config.num_threads < current // 2:
            raise ValueError("Log cleaner threads cannot be reduced to less than half the "
                             f"current value {current}")
        if config.num_threads > current * 2:
            raise ValueError("Log cleaner threads cannot be increased to more than double the "
                             f"current value {current}")

    def _run(self, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self._try_clean_filthiest_log(cleaner)
            except ThreadShutdownError:
                return
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000)
            self.manager.maintain_uncleanable_partitions()

    def _new_cleaner(self, cleaner_id: int) -> Cleaner:
        return Cleaner(
            cleaner_id,
            SkimpyOffsetMap(self.config.dedupe_buffer_size_per_thread),
            dup_buffer_load_factor=self.config.dedupe_buffer_load_factor,
            io_buffer_size=self.config.io_buffer_size_per_thread,
            throttler=self.throttler,
            clock=self.clock,
            check_done=self._check_done,
            fault=self.fault,
        )

    def _check_done(self, tp: TopicPartition | None) -> None:
        if self._stop.is_set() and self._threads:
            raise ThreadShutdownError()
        self.manager.check_cleaning_aborted(tp)

    # -- one round ---------------------------------------------------------------------------
    def clean_once(self) -> bool:
        """One cleaner iteration on the caller's thread; True if a log was cleaned."""
        if self._cleaner is None:
            self._cleaner = self._new_cleaner(-1)
        cleaned = self._try_clean_filthiest_log(self._cleaner)
        self.manager.maintain_uncleanable_partitions()
        return cleaned

    def _try_clean_filthiest_log(self, cleaner: Cleaner) -> bool:
        try:
            return self._clean_filthiest_log(cleaner)
        except LogCleaningError as e:
            log.warning("Unexpected exception thrown when cleaning log %s. Marking its "
                        "partition (%s) as uncleanable", e.log.dir, e.topic_partition,
                        exc_info=e.__cause__ or e)
            self.manager.mark_partition_uncleanable(log_dir_of(e.log), e.topic_partition)
            return False

    def _clean_filthiest_log(self, cleaner: Cleaner) -> bool:
        ltc = self.manager.grab_filthiest_compacted_log(self.clock.milliseconds())
        cleaned = False
        if ltc is not None:
            try:
                self._clean_log(cleaner, ltc)
                cleaned = True
            except ThreadShutdownError:
                raise
            except Exception as e:
                raise LogCleaningError(ltc.log, ltc.topic_partition, str(e)) from e
        deletable = self.manager.deletable_logs()
        try:
            for tp, lg in deletable.items():
                try:
                    lg.delete_old_segments()
                except Exception as e:
                    if not self._reported_disk_failure(lg, e, f"deleting old segments of {tp}"):
                        raise LogCleaningError(lg, tp, str(e)) from e
        finally:
            self.manager.done_deleting(deletable.keys())
        return cleaned

    def _clean_log(self, cleaner: Cleaner, ltc: LogToClean) -> None:
        end = ltc.first_dirty_offset
        started = time.monotonic()
        try:
            end, stats = cleaner.clean(ltc)
            stats.elapsed_secs = time.monotonic() - started
            self.last_stats[ltc.topic_partition] = stats
            log.info("Cleaned log %s: [%d, %d), %d -> %d bytes, %d -> %d messages",
                     ltc.log.name, ltc.first_dirty_offset, end, stats.bytes_read,
                     stats.bytes_written, stats.messages_read, stats.messages_written)
        except LogCleaningAbortedError:
            log.info("Cleaning of %s was aborted", ltc.topic_partition)
        except KafkaStorageError:
            log.warning("Log %s went offline while being cleaned", ltc.topic_partition)
        except Exception as e:
            # Kafka's cleanLog: an IOException takes the log's dir offline (through the
            # LogDirFailureChannel); anything else marks the partition uncleanable (caller)
            if not self._reported_disk_failure(ltc.log, e, f"cleaning {ltc.topic_partition}"):
                raise
        finally:
            self.manager.done_cleaning(ltc.topic_partition, log_dir_of(ltc.log), end)

    def _reported_disk_failure(self, lg: Log, exc: BaseException, op: str) -> bool:
        handler = self.io_error_handler
        return handler is not None and handler(lg, exc, op)

    # -- for the LogManager ------------------------------------------------------------------
    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def update_checkpoints(self, data_dir: Path, remove: TopicPartition | None = None) -> None:
        self.manager.update_checkpoints(data_dir, remove=remove)

    def maybe_truncate_checkpoint(self, data_dir: Path, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(data_dir, tp, offset)
