"""A second process opening a log dir that a running LogManager holds fails and touches nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tidelog.records.builder import build_batch
from tidelog.storage.manager import LogManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

SECOND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tidelog.storage.manager import LogManager
    from tidelog.util.clock import SystemClock
    from tidelog.util.scheduler import KafkaScheduler

    sched = KafkaScheduler()
    sched.startup()
    try:
        m = LogManager([Path(p) for p in sys.argv[1:]], {}, clock=SystemClock(), scheduler=sched)
        m.startup()
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(3)
    finally:
        sched.shutdown()
    sys.exit(0)
    """
)


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under root with (size, mtime_ns, sha256 of content or '' for dirs)."""
    out: dict[str, tuple[int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.stat()
            digest = "" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def test_second_process_fails_fast_and_touches_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    first = LogManager([d1, d2], {}, clock=clock, scheduler=ManualScheduler(clock))
    first.startup()
    try:
        for p in range(4):
            lg = first.get_or_create_log(TopicPartition("held", p))
            lg.append_as_leader(build_batch([(clock.milliseconds(), b"k", b"v")]))
            lg.flush()
        first.checkpoint_log_recovery_offsets()
        (d1 / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
        before = _snapshot(tmp_path)

        proc = subprocess.run(
            [sys.executable, "-c", SECOND, str(d2), str(d1)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, proc.stderr
        assert "Failed to acquire lock on file .lock" in proc.stderr
        assert str(d2.resolve()) in proc.stderr
        # Nothing changed: no file created, removed, resized or rewritten (the marker and
        # checkpoints included), in the locked dirs or anywhere else under them.
        assert _snapshot(tmp_path) == before
        # The first manager still owns its logs.
        lg = first.get_log(TopicPartition("held", 0))
        assert lg is not None and lg.log_end_offset == 1
    finally:
        first.shutdown()
