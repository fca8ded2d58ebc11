"""kill -9 while a process rewrites a checkpoint in a loop: the file is always whole.

tmp + fsync + rename + dir fsync means a reader after the crash sees either the previous
complete checkpoint or the next one, never a torn or empty file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tidelog.storage.checkpoints import OffsetCheckpointFile
from tidelog.util.topic_partition import TopicPartition

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tidelog.storage.checkpoints import OffsetCheckpointFile
    from tidelog.util.topic_partition import TopicPartition

    cp = OffsetCheckpointFile(Path(sys.argv[1]))
    n = 0
    while True:
        n += 1
        # 300 partitions, all at offset n: a torn write would mix or truncate lines.
        cp.write({TopicPartition("topic-with-a-longish-name", p): n for p in range(300)})
        print(n, flush=True)
    """
)


def test_checkpoint_is_whole_after_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    for writes_before_kill in (1, 7, 40):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        last_acked = 0
        try:
            for _ in range(writes_before_kill):
                last_acked = int(proc.stdout.readline())
        finally:
            os.kill(proc.pid, signal.SIGKILL)  # usually in the middle of the next write
            proc.wait()
        offsets = OffsetCheckpointFile(path).read()
        assert len(offsets) == 300
        values = set(offsets.values())
        assert len(values) == 1  # one complete generation, never a mix
        (n,) = values
        assert n >= last_acked  # an acknowledged (renamed) write is never lost
        assert offsets[TopicPartition("topic-with-a-longish-name", 299)] == n
