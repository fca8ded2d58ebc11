"""A broker under the common ``ulimit -n 1024`` hosts 850 partitions (one descriptor per
segment: indexes hold none), also after a restart; a CreateTopics that runs out of
descriptors fails with a clear error and leaves no trace (no partition dirs, no topic), other
topics keep working; start-up removes the dirs of a create cut short by a crash."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from serve_process import ServeProcess

LIMIT = 1024
HOSTED = 850


@contextmanager
def _fd_limit(n: int) -> Iterator[None]:
    """Children started inside inherit a soft RLIMIT_NOFILE of ``n``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _start(log_dir: Path) -> ServeProcess:
    with _fd_limit(LIMIT):
        return ServeProcess(log_dir).start()


def _fds(sp: ServeProcess) -> int:
    assert sp.proc is not None
    return len(os.listdir(f"/proc/{sp.proc.pid}/fd"))


def _create(bootstrap: str, name: str, partitions: int) -> BaseException | None:
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([cka.NewTopic(name, partitions, 1)], request_timeout=300)[name]
    try:
        fut.result(300)
    except Exception as exc:
        return exc
    return None


def _produce_ok(bootstrap: str, topic: str, partitions: list[int]) -> bool:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    errors = []
    for q in partitions:
        p.produce(topic, b"v%d" % q, partition=q, on_delivery=lambda e, m: errors.append(e))
    p.flush(60)
    return len(errors) == len(partitions) and not any(errors)


def _listed(bootstrap: str) -> set[str]:
    import confluent_kafka.admin as cka

    return set(cka.AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def test_850_partitions_under_ulimit_1024(tmp_path: Path) -> None:
    sp = _start(tmp_path)
    try:
        before = _fds(sp)
        assert _create(sp.bootstrap_servers, "many", HOSTED) is None
        used = _fds(sp) - before
        print(f"\ndescriptors per partition: {used / HOSTED:.2f} ({used} for {HOSTED})")
        assert used <= HOSTED * 1.1, used
        assert _produce_ok(sp.bootstrap_servers, "many", [0, HOSTED // 2, HOSTED - 1])

        # 300 more partitions cannot fit under 1024 descriptors: all or none.
        err = _create(sp.bootstrap_servers, "toomany", 300)
        assert err is not None, "the create must fail"
        assert "Too many open files" in str(err), err
        assert not list(tmp_path.glob("toomany-*")), "a failed create leaves no dirs"
        assert "toomany" not in _listed(sp.bootstrap_servers)
        assert _fds(sp) - before <= HOSTED * 1.1  # its descriptors were given back
        assert _produce_ok(sp.bootstrap_servers, "many", [1, 2])
        assert sp.proc is not None and sp.proc.poll() is None
        assert sp.stop() == 0
    finally:
        if sp.proc is not None and sp.proc.poll() is None:
            sp.kill()

    # A create cut short by a crash: partition dirs of a topic that was never published.
    ghost = tmp_path / "ghost-0"
    ghost.mkdir()
    (ghost / "00000000000000000000.log").write_bytes(b"")
    t0 = time.monotonic()
    sp2 = _start(tmp_path)
    try:
        print(f"restart with {HOSTED} partitions: {time.monotonic() - t0:.1f} s")
        assert not ghost.exists(), "start-up removes stray partition dirs"
        assert "ghost" not in _listed(sp2.bootstrap_servers)
        assert _produce_ok(sp2.bootstrap_servers, "many", [0, 3, HOSTED - 1])
    finally:
        sp2.stop()
