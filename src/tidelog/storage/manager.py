"""LogManager: the broker-wide owner of every partition log (Kafka's LogManager).

It owns the log dirs (created, de-duplicated, locked with ``.lock``), loads every partition
dir at startup with ``num.recovery.threads.per.data.dir`` workers per dir, places new
partitions in the least-loaded dir, runs the periodic tasks (retention, flusher, recovery-point
and log-start-offset checkpoints, delayed deletion of ``-delete`` dirs) on an injected
scheduler, and shuts down cleanly (flush, close, checkpoints, ``.kafka_cleanshutdown``).

Loading and the periodic tasks live in ``manager_tasks``, DeleteRecords and truncation in
``manager_records``; this module holds the state and the lifecycle operations the broker
calls.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tidelog.config.log_config import LogConfig
from tidelog.storage.checkpoints import (
    fsync_dir,
)
from tidelog.storage.cleaner import CleanerConfig, LogCleaner
from tidelog.storage.dir_lock import LogDir, LogDirError, canonical_dirs, lock_dir, prepare_dir
from tidelog.storage.errors import KafkaStorageError, StorageError
from tidelog.storage.free_space import FreeSpaceFloor
from tidelog.storage.log import Log
from tidelog.storage.log_dir_failure import LogDirFailureChannel
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.storage.manager_faults import LogManagerFaults
from tidelog.storage.manager_placement import LogsByDir
from tidelog.storage.manager_records import LogManagerRecords, PolicyViolationError
from tidelog.storage.manager_tasks import first_segment_base
from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler
from tidelog.util.topic_partition import TopicPartition, delete_dir_name, validate_topic_name

log = logging.getLogger(__name__)

TopicConfigs = Mapping[str, Mapping[str, str]] | Callable[[str], Mapping[str, str] | None]


class UnknownTopicOrPartitionError(StorageError):
    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


class LogManager(LogManagerFaults, LogManagerRecords):
    """All partition logs of one broker, across its log dirs."""

    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        broker_log_defaults: Mapping[str, Any],
        *,
        clock: Clock,
        scheduler: Scheduler,
        config: LogManagerConfig | None = None,
        topic_configs: TopicConfigs | None = None,
        broker_epoch: int = -1,
        cleaner_config: CleanerConfig | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.clock = clock
        self.scheduler = scheduler
        self.broker_log_defaults = dict(broker_log_defaults)
        self.config = (
            config if config is not None else LogManagerConfig.from_props(broker_log_defaults)
        )
        self.broker_epoch = broker_epoch
        self._topic_configs = topic_configs
        self._topic_overrides: dict[str, dict[str, str]] = {}
        # each topic's live changes of its overrides, counted (``overrides_version``)
        self._overrides_versions: Counter[str] = Counter()
        self._config_cache: dict[tuple[tuple[str, str], ...], LogConfig] = {}
        self._lock = threading.RLock()
        self._logs = LogsByDir()
        self.logs_by_dir = self._logs  # (to read only: its ``version`` without a call)
        self._init_creating()
        # Partitions whose dir went offline: they answer KAFKA_STORAGE_ERROR, never move.
        self._offline_logs: dict[TopicPartition, Path] = {}
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.failure_channel.add_listener(self._handle_log_dir_failure)
        self._all_dirs_offline_listeners: list[Callable[[], object]] = []
        self._started = False
        self._shut_down = False
        self._owns_scheduler = False
        cleaner_cfg = cleaner_config or CleanerConfig.from_props(broker_log_defaults)
        self.dirs = [LogDir(p) for p in canonical_dirs(log_dirs)]
        self._init_tasks()
        self._lock_dirs()  # last fallible step: nothing after it may leave the locks held
        self.cleaner = self._make_cleaner(cleaner_cfg)
        self._init_free_space()

    def _init_creating(self) -> None:
        """The logs being created (``Log.open`` in progress) and what that tracks."""
        self._creating: dict[TopicPartition, threading.Event] = {}  # Log.open in progress
        # those whose topic's configs changed meanwhile (Kafka's partitionsInitializing):
        # their log takes the topic's current configs once published
        self._reconfigure: set[TopicPartition] = set()
        # the dir each of those is being created in, counted by the next placement as Kafka's
        # LogManager does (choice and creation under one lock there)
        self._placing: dict[TopicPartition, Path] = {}

    def _init_free_space(self) -> None:
        """log.dir.min.free.bytes: each leader append checks its dir's floor
        (free_space.py)."""
        self.free_space = FreeSpaceFloor(self.config.min_free_bytes)
        for d in self.dirs:
            if d.online:
                self.free_space.add_dir(d.path)
        self._logs.on_store = self._guard_free_space

    def _make_cleaner(self, cfg: CleanerConfig) -> LogCleaner | None:
        """Kafka's LogManager owns the cleaner; ``log.cleaner.enable=false`` means none."""
        if not cfg.enable_cleaner:
            return None
        # A lock-free copy: the cleaner calls this while holding its own lock, and we call
        # the cleaner (abort, checkpoints) without holding ours, so the locks never nest.
        return LogCleaner(cfg, self.live_log_dirs, lambda: self._logs.copy(), self.clock,
                          io_error_handler=self.maybe_handle_io_error)

    def _guard_free_space(self, lg: Log) -> None:
        """Each log as it is stored: its dir's free-space floor, and its leader-epoch
        checkpoint's scheduled writes failing take the dir offline (Kafka's checkpoint
        writeIfDirExists reports to the LogDirFailureChannel)."""
        key = self.free_space.dir_key(Path(lg.dir).parent)
        lg.append_guard = functools.partial(self.free_space.check_append, key)
        lg.append_space = self.free_space.space(key)
        lg.leader_epoch_cache.io_error_handler = functools.partial(
            self.maybe_handle_io_error, lg, op=f"writing the leader-epoch-checkpoint of {lg.name}")

    # -- log dirs ------------------------------------------------------------------------------
    def _lock_dirs(self) -> None:
        """Create/check every dir, then lock it; any lock failure releases the ones taken."""
        for d in self.dirs:
            reason = prepare_dir(d.path)
            if reason is not None:
                log.error("Log directory %s is offline: %s", d.path, reason)
                d.offline_reason = reason
        if not any(d.online for d in self.dirs):
            raise LogDirError(
                "Shutdown broker because all log dirs in "
                f"{', '.join(str(d.path) for d in self.dirs)} have failed"
            )
        try:
            for d in self.dirs:
                if d.online:
                    d.lock = lock_dir(d.path)
        except BaseException:
            self._release_locks()
            raise

    def _release_locks(self) -> None:
        for d in self.dirs:
            if d.lock is not None:
                d.lock.release()
                d.lock = None

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d.path for d in self.dirs if d.online]

    def _log_dir_of(self, path: Path) -> LogDir:
        for d in self.dirs:
            if d.path == path:
                return d
        raise LogDirError(f"{path} is not one of the log dirs")

    # -- lifecycle -----------------------------------------------------------------------------
    def startup(self) -> None:
        """Load every log, then start the periodic tasks."""
        if self._started:
            raise RuntimeError("LogManager already started")
        if self._shut_down:
            raise RuntimeError("LogManager was shut down; create a new one")
        self._started = True
        self._maybe_start_scheduler()
        try:
            self._load_logs()
        except BaseException:
            self._abort_startup()
            raise
        self._schedule_tasks()
        if self.cleaner is not None:
            self.cleaner.startup()

    def _stop_cleaner(self) -> None:
        if self.cleaner is not None:
            try:
                self.cleaner.shutdown()
            except Exception:
                log.error("Error shutting down the log cleaner", exc_info=True)

    def _maybe_start_scheduler(self) -> None:
        """Start a scheduler handed over unstarted (then it is ours to stop at shutdown)."""
        is_started = getattr(self.scheduler, "is_started", None)
        if is_started is not None and not is_started():
            self.scheduler.startup()
            self._owns_scheduler = True

    def _stop_owned_scheduler(self) -> None:
        if self._owns_scheduler:
            self._owns_scheduler = False
            self.scheduler.shutdown()

    def _abort_startup(self) -> None:
        """Close what was loaded and unlock; no marker (the next start must recover)."""
        self._stop_cleaner()
        for lg in list(self._logs.values()):
            try:
                lg.close()
            except Exception:
                log.warning("Error closing %s after failed startup", lg.dir, exc_info=True)
        self._logs.clear()
        self._shut_down = True
        self._release_locks()
        self._stop_owned_scheduler()

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker."""
        if self._shut_down:
            return
        self._shut_down = True
        self._stop_cleaner()  # first, as in Kafka: no compaction while logs close
        self._cancel_tasks()
        # Stop our scheduler first so no task runs while logs close (Kafka's broker does too):
        # it runs the one-shot tasks already due (leader-epoch checkpoint writes) first.
        self._stop_owned_scheduler()
        log.info("Shutting down the log manager.")
        for d in self.dirs:
            if d.online:
                self._shutdown_dir(d)
        with self._lock:
            self._logs.clear()
        self._release_locks()
        for line in self.failure_channel.summary():
            log.warning("Log directory %s", line)
        log.info("Shutdown of the log manager complete.")

    def _shutdown_dir(self, d: LogDir) -> None:
        logs = self._logs_in_dir(d.path)
        ok = True
        for lg in logs:
            try:
                lg.flush()
                # a write scheduled elsewhere (a scheduler not ours) made now, or waited for
                if lg.leader_epoch_cache.unflushed:
                    lg.leader_epoch_cache.flush()
                lg.close()
            except Exception:
                ok = False
                log.error("Error flushing/closing log %s during shutdown", lg.dir, exc_info=True)
        if not d.loaded:
            # Checkpoints of a dir that never finished loading would list only part of its
            # logs and wipe the others' recovery points and start offsets: keep the old ones.
            return
        ok = self._checkpoint_dir(d, logs) and ok
        if not ok:
            return  # only a dir whose every log closed and was checkpointed skips recovery
        try:
            d.clean_shutdown_file.write(self.broker_epoch)
            log.info("Wrote clean shutdown marker in %s", d.path)
        except OSError:
            log.error("Error writing the clean shutdown marker in %s", d.path, exc_info=True)

    # -- lookups -------------------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    @property
    def logs_version(self) -> int:
        """Changes whenever a log is stored or removed (read before ``get_log``: unchanged
        later, what it returned is still current)."""
        return self._logs.version

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_by_topic(self, topic: str) -> dict[TopicPartition, Log]:
        with self._lock:
            return {tp: lg for tp, lg in self._logs.items() if tp.topic == topic}

    def _logs_in_dir(self, path: Path) -> list[Log]:
        with self._lock:
            return self._logs.in_dir(path)

    def _require_log(self, tp: TopicPartition) -> Log:
        lg = self.get_log(tp)
        if lg is None:
            raise UnknownTopicOrPartitionError(f"No log for partition {tp} on this broker")
        return lg

    # -- topic configs -------------------------------------------------------------------------
    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's config overrides (as last set, or from the config source at load)."""
        if topic in self._topic_overrides:
            return dict(self._topic_overrides[topic])
        source = self._topic_configs
        found = source(topic) if callable(source) else (source or {}).get(topic)
        return dict(found or {})

    def log_config(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The effective config for these overrides (default: the topic's current ones).

        Cached per distinct override set: LogConfig is immutable, and parsing every key for
        each of thousands of partitions at startup would cost a visible share of loading.
        """
        chosen = self.topic_overrides(topic) if overrides is None else overrides
        key = tuple(sorted((str(k), str(v)) for k, v in chosen.items()))
        cfg = self._config_cache.get(key)
        if cfg is None:
            cfg = LogConfig.from_props(chosen, self.broker_log_defaults)
            self._config_cache[key] = cfg
        return cfg

    def update_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Replace the topic's overrides and apply them live to every partition of it."""
        cfg = self.log_config(topic, overrides)  # validate before changing anything
        with self._lock:
            self._topic_overrides[topic] = dict(overrides)
            self._overrides_versions[topic] += 1
            logs = [lg for tp, lg in self._logs.items() if tp.topic == topic]
            self._reconfigure.update(tp for tp in self._creating if tp.topic == topic)
        for lg in logs:
            lg.update_config(cfg)
        log.info("Updated config of topic %s (%d logs): %s", topic, len(logs), dict(overrides))
        return cfg

    def overrides_version(self, topic: str) -> int:
        """Read with overrides passed later (``get_or_create_log``'s ``read_at``): a live
        change made meanwhile is newer, and they do not undo it."""
        with self._lock:
            return self._overrides_versions[topic]

    def update_broker_log_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New broker-level defaults under every topic's overrides, applied live to every
        log (dynamic broker configs, Kafka's DynamicLogConfig)."""
        with self._lock:
            self.broker_log_defaults = dict(defaults)
            self._config_cache.clear()
            topics = {tp.topic for tp in self._logs}
            self._reconfigure.update(self._creating)  # Kafka's brokerConfigUpdated
        for topic in topics:
            self.update_topic_config(topic, self.topic_overrides(topic))

    # -- create / delete -----------------------------------------------------------------------
    def get_or_create_log(
        self, tp: TopicPartition, topic_overrides: Mapping[str, str] | None = None,
        read_at: int | None = None,
    ) -> Log:
        """The partition's log, created in the least-loaded live dir if missing, with
        ``topic_overrides`` unless the topic's configs changed since they were read (at
        ``overrides_version`` ``read_at``): the newest overrides win.

        The lock is held to check and to publish, not across Log.open: a CreateTopics of
        thousands of partitions on the admin thread must not block every produce and
        fetch that looks a log up. A second caller for the same partition waits for the
        first one's open."""
        while True:
            with self._lock:
                stale = read_at is not None and read_at != self._overrides_versions[tp.topic]
                overrides = None if stale else topic_overrides  # Kafka reads them at creation
                existing = self._logs.get(tp)
                if existing is not None:
                    self._maybe_apply_overrides(tp.topic, overrides)
                    return existing
                pending = self._creating.get(tp)
                if pending is None:
                    cfg = self._check_creatable(tp, overrides)
                    dirs = self._dirs_by_load()
                    if dirs:
                        self._placing[tp] = dirs[0].path
                    done = self._creating[tp] = threading.Event()
                    break
            pending.wait()
        try:
            lg = self._create_in_some_dir(tp, cfg, dirs)
            with self._lock:
                if self._shut_down:
                    lg.close()
                    raise KafkaStorageError(f"Cannot create log for {tp}: log manager is shut down")
                self._logs[tp] = lg
                self._last_flush[tp] = self.clock.milliseconds()
                if tp in self._reconfigure:  # Kafka's finishedInitializingLog
                    lg.update_config(self.log_config(tp.topic))
            return lg
        finally:
            with self._lock:
                del self._creating[tp]
                self._reconfigure.discard(tp)
                self._placing.pop(tp, None)
            done.set()

    def _check_creatable(self, tp: TopicPartition, overrides: Mapping[str, str] | None) -> LogConfig:
        """Under the lock: refuse what may not be created now; the config to create with."""
        offline = self._offline_logs.get(tp)
        if offline is not None:
            self.failure_channel.count_refused(offline)
            raise KafkaStorageError(f"Log for partition {tp} is offline (log dir {offline})")
        if self._shut_down or not self._started:
            # Before startup the partition's existing dir is not loaded yet: creating it
            # now would race the loader (and then look like a duplicate).
            state = "shut down" if self._shut_down else "not started"
            raise KafkaStorageError(f"Cannot create log for {tp}: log manager is {state}")
        validate_topic_name(tp.topic)
        if tp.partition < 0:
            raise ValueError(f"invalid partition {tp.partition} for topic {tp.topic}")
        if overrides is not None:
            self.log_config(tp.topic, overrides)  # reject bad configs up front
            self._topic_overrides[tp.topic] = dict(overrides)
        return self.log_config(tp.topic)

    def _maybe_apply_overrides(self, topic: str, overrides: Mapping[str, str] | None) -> None:
        """A caller passing the topic's configs for a loaded log wins over what load used.

        Kafka reads topic configs from its metadata while loading; a broker that keeps them
        elsewhere passes them here right after startup, so they must not be ignored.
        """
        if overrides is not None and dict(overrides) != self.topic_overrides(topic):
            self.update_topic_config(topic, overrides)

    def _dirs_by_load(self) -> list[LogDir]:
        """Live dirs, fewest partitions first (ties keep log.dirs order); a log still being
        opened counts in the dir it was placed in."""
        counts = Counter(self._logs.counts)
        counts.update(self._placing.values())
        return sorted((d for d in self.dirs if d.online), key=lambda d: counts[d.path])

    def _create_in_some_dir(self, tp: TopicPartition, cfg: LogConfig, dirs: list[LogDir]) -> Log:
        errors: list[str] = []
        for d in dirs:
            if not d.online:  # went offline since the choice
                continue
            path = d.path / tp.dir_name
            fresh = not path.exists()
            try:
                path.mkdir(exist_ok=True)
                lg = Log.open(
                    path,
                    cfg,
                    clock=self.clock,
                    scheduler=self.scheduler,
                    producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                )
            except OSError as exc:
                errors.append(f"{path}: {exc}")
                if fresh:  # leave no half-created partition dir behind
                    shutil.rmtree(path, ignore_errors=True)
                if not self.maybe_handle_io_error(d.path, exc, f"creating log for {tp}"):
                    # out of descriptors/memory: a resource error, the dir itself is fine
                    raise KafkaStorageError(f"Could not create log for {tp}: {exc}") from exc
                continue
            log.info("Created log for partition %s in %s", tp, path)
            return lg
        raise KafkaStorageError(f"Could not create log for {tp} in any log dir: {errors}")

    def delete_log(self, tp: TopicPartition) -> Path | None:
        """Rename the partition dir to ``<topic>-<p>.<uuid>-delete``; remove it later.

        Returns the renamed dir, or None if this broker has no log for ``tp``.
        """
        return self.delete_logs([tp]).get(tp)

    def delete_logs(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Path]:
        """``delete_log`` of each partition, each log dir fsynced and checkpointed once for
        all of them (Kafka's asyncDelete of a set: a topic of 1,000 partitions is not 1,000
        rewrites of its dir's checkpoints). The renamed dirs of the partitions found here."""
        with self._lock:
            found = [(tp, lg) for tp in tps if (lg := self._logs.pop(tp, None)) is not None]
            for tp, _ in found:
                self._last_flush.pop(tp, None)
        parents: dict[Path, None] = {}
        for tp, lg in found:
            parents[Path(lg.dir).parent] = None
            if self.cleaner is not None:
                self.cleaner.abort_cleaning(tp)  # waits until no cleaner thread touches it
            lg.rename_dir(delete_dir_name(tp))
            log.info("Log for partition %s is renamed to %s and scheduled for deletion", tp, lg.dir)
        for parent in parents:
            fsync_dir(parent)  # the renames must survive a crash: the topic is gone for clients
            self._checkpoint_dir(self._log_dir_of(parent), self._logs_in_dir(parent))
            if self.cleaner is not None:
                self.cleaner.update_checkpoints(parent)  # (keeps only the logs still here)
        for _, lg in found:
            self._schedule_log_deletion(Path(lg.dir), lg, lg.config.file_delete_delay_ms)
        return {tp: Path(lg.dir) for tp, lg in found}

    def adopt_log(self, tp: TopicPartition, lg: Log) -> None:
        """A log opened outside the loader (a future replica promoted at startup)."""
        with self._lock:
            self._logs[tp] = lg

    def replace_current_with_future(self, tp: TopicPartition, current: Log, future: Log) -> None:
        """Kafka's replaceCurrentWithFutureLog, the caller holding ``current``'s lock (and
        cleaning of ``tp`` paused): the current dir is renamed -delete, then the future one
        takes the partition's name. Under our lock, so a concurrent ``delete_log`` either
        finds the moved log (and deletes it) or made this raise (the move is dropped)."""
        old_parent, new_parent = Path(current.dir).parent, Path(future.dir).parent
        with self._lock:
            if self._logs.get(tp) is not current:
                raise RuntimeError(f"{tp} was deleted or replaced during its move")
            current.rename_dir(delete_dir_name(tp))
            fsync_dir(old_parent)  # durable before the second rename: never two live dirs
            future.rename_dir(tp.dir_name)
            fsync_dir(new_parent)
            self._logs[tp] = future
        for parent in (old_parent, new_parent):
            self._checkpoint_dir(self._log_dir_of(parent), self._logs_in_dir(parent))
        if self.cleaner is not None:
            self.cleaner.update_checkpoints(old_parent, remove=tp)
        self._schedule_log_deletion(Path(current.dir), current,
                                    current.config.file_delete_delay_ms)

    def __repr__(self) -> str:
        return f"LogManager(dirs={[str(d.path) for d in self.dirs]}, logs={len(self._logs)})"


__all__ = [
    "LogDir",
    "LogManager",
    "LogManagerConfig",
    "PolicyViolationError",
    "UnknownTopicOrPartitionError",
    "first_segment_base",
]
