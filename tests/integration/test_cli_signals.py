"""Ctrl-C means the same to tidelog's commands whichever way they were started.

A shell without job control (a script, CI, ``sh -c 'cmd &'``) starts a background job with
SIGINT ignored, and a Python process keeps an inherited ignored SIGINT ignored. These tests
start the commands exactly that way (a real non-interactive bash running them with ``&``) and
send the SIGINT a terminal would; each command must still stop as it does at a terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TIDELOG = [sys.executable, "-m", "tidelog.cli.main"]
# Runs "$@" as a background job of a non-interactive shell (stdin passed on explicitly, as a
# background job's stdin is otherwise /dev/null), prints its pid, waits for it.
BACKGROUND = ["bash", "-c", '"$@" 0<&0 & echo $!; wait $!; exit $?', "bash"]


def background(*cmd: str) -> tuple[subprocess.Popen[str], int]:
    shell = subprocess.Popen(
        [*BACKGROUND, *cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert shell.stdout is not None
    return shell, int(shell.stdout.readline())


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_background_job_of_a_script_inherits_sigint_ignored() -> None:
    """The premise: without the commands' own handling, SIGINT would do nothing to them."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    shell, _ = background(sys.executable, "-c", probe)
    out, _err = shell.communicate(timeout=30)
    assert out.split()[-1] == "True"


def _topic_records(broker: EmbeddedBroker, topic: str) -> int:
    log = broker.broker.replica_manager.logs.get_log(TopicPartition(topic, 0))
    return 0 if log is None else int(log.log_end_offset)


def test_produce_and_consume_stop_on_sigint_as_at_a_terminal() -> None:
    with EmbeddedBroker() as broker:
        bs = ["--bootstrap-server", broker.bootstrap_servers]
        producer, pid = background(*TIDELOG, "produce", *bs, "--topic", "bg")
        assert producer.stdin is not None
        producer.stdin.write("".join(f"line {i}\n" for i in range(10)))
        producer.stdin.flush()  # stdin stays open: the producer waits for more lines
        wait_for(lambda: _topic_records(broker, "bg") == 10, "the 10 lines to be produced")
        os.kill(pid, signal.SIGINT)
        _out, err = producer.communicate(timeout=30)
        assert producer.returncode == 130, err

        consumer, pid = background(*TIDELOG, "consume", *bs, "--topic", "bg", "--from-beginning")
        assert consumer.stdout is not None
        lines = [consumer.stdout.readline().strip() for _ in range(10)]
        assert lines == [f"line {i}" for i in range(10)]
        os.kill(pid, signal.SIGINT)
        _out, err = consumer.communicate(timeout=30)
        assert consumer.returncode == 130, err
        assert "Processed a total of 10 messages" in err


def test_serve_stops_cleanly_on_sigint_from_a_background_job(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shell, pid = background(
        *TIDELOG, "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
        "--override", f"log.dirs={logs}", "--ready-file", str(tmp_path / "ready"),
    )  # fmt: skip
    wait_for((tmp_path / "ready").exists, "the broker to listen")
    os.kill(pid, signal.SIGINT)
    _out, err = shell.communicate(timeout=60)
    assert shell.returncode == 0, err
    assert (logs / ".kafka_cleanshutdown").exists()
