"""Log-dir handling: duplicates, creation, access checks, the ``.lock`` file lock."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tidelog.storage.dir_lock import (
    FileLock,
    LogDirError,
    LogDirLockedError,
    canonical_dirs,
    lock_dir,
    prepare_dir,
)
from tidelog.storage.manager_config import LogManagerConfig


def test_duplicate_dirs_rejected_even_through_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "a"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(LogDirError, match="Duplicate log directory"):
        canonical_dirs([real, tmp_path / "link"])
    with pytest.raises(LogDirError, match="Duplicate log directory"):
        canonical_dirs([str(real), str(real) + "/"])
    with pytest.raises(LogDirError, match="No log directories"):
        canonical_dirs([])
    assert canonical_dirs([real, tmp_path / "b"]) == [real.resolve(), (tmp_path / "b").resolve()]


def test_prepare_creates_missing_and_reports_bad(tmp_path: Path) -> None:
    missing = tmp_path / "x" / "y"
    assert prepare_dir(missing) is None
    assert missing.is_dir()
    afile = tmp_path / "file"
    afile.write_text("x")
    assert "not a directory" in (prepare_dir(afile) or "")
    if os.geteuid() != 0:  # root ignores permission bits
        locked = tmp_path / "noaccess"
        locked.mkdir(mode=0o000)
        try:
            assert "not readable" in (prepare_dir(locked) or "")
        finally:
            locked.chmod(0o755)


def test_lock_is_exclusive_within_a_process(tmp_path: Path) -> None:
    first = lock_dir(tmp_path)
    with pytest.raises(LogDirLockedError, match=re.escape(str(tmp_path))):
        lock_dir(tmp_path)
    first.release()
    first.release()  # idempotent
    again = lock_dir(tmp_path)
    assert again.locked
    again.release()


_HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tidelog.storage.dir_lock import lock_dir
    lock = lock_dir(Path(sys.argv[1]))
    print("locked", flush=True)
    sys.stdin.read()  # hold the lock until the parent closes our stdin
    """
)


def test_lock_held_by_another_process_and_dropped_when_it_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirLockedError, match="another process"):
            lock_dir(tmp_path)
    finally:
        holder.kill()  # SIGKILL: the OS must drop the flock
        holder.wait()
    lock = lock_dir(tmp_path)
    assert lock.locked
    lock.release()


def test_file_lock_on_missing_dir_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        FileLock(tmp_path / "nope" / ".lock").try_lock()


def test_manager_config_defaults_and_overrides() -> None:
    cfg = LogManagerConfig.from_props({})
    assert cfg.retention_check_interval_ms == 300000
    assert cfg.initial_task_delay_ms == 30000
    assert cfg.flush_recovery_offset_checkpoint_ms == 60000
    assert cfg.flush_start_offset_checkpoint_ms == 60000
    assert cfg.num_recovery_threads_per_data_dir == 1
    assert cfg.flush_check_ms == 1000
    cfg = LogManagerConfig.from_props(
        {
            "log.retention.check.interval.ms": "1000",
            "num.recovery.threads.per.data.dir": "4",
            "log.flush.scheduler.interval.ms": "250",
            "log.segment.bytes": "1024",  # not ours: ignored
        }
    )
    assert cfg.retention_check_interval_ms == 1000
    assert cfg.num_recovery_threads_per_data_dir == 4
    assert cfg.flush_check_ms == 250
    with pytest.raises(ValueError, match=r"num\.recovery\.threads\.per\.data\.dir"):
        LogManagerConfig.from_props({"num.recovery.threads.per.data.dir": "0"})
