"""A broker process that exits says why: ``tidelog serve`` logs "broker failed" for a
SystemExit or a cancellation escaping its serving task too (not only for an Exception), and
the cluster harness shows an exited broker's last line even when that line was still in the
pipe when its exit code was read."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

import pytest

from tidelog.cli import serve
from tidelog.server.sched_slice import ENV
from tidelog.server.slice_governor import SliceGovernor
from tidelog.testing.cluster import BrokerProcess


@pytest.mark.parametrize("escape", [SystemExit(3), asyncio.CancelledError()])
def test_serve_says_why_for_what_is_not_an_exception(
        escape: BaseException, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    async def serving(props: dict[str, str], ready_file: Path | None,
                      governor: SliceGovernor | None) -> None:
        raise escape

    monkeypatch.setattr(serve, "_serve", serving)
    monkeypatch.setenv(ENV, "0")  # this process's scheduler slice left as it is
    args = argparse.Namespace(config=None, override=[], port=None, ready_file=None)
    with caplog.at_level(logging.ERROR, logger=serve.log.name):
        assert serve.run(args) == 1
    assert any(r.getMessage().startswith("broker failed: " + type(escape).__name__)
               for r in caplog.records)


def test_an_exited_brokers_last_line_is_shown(tmp_path: Path) -> None:
    """The process exits at once; its last line reaches the pipe half a second later (from
    a child still holding it): the tail waits for the pipe's end, not the exit code."""
    script = ("echo 'listening on 127.0.0.1:9 ' >&2; "
              "(sleep 0.5; echo 'broker failed: the reason' >&2) & exit 1")
    broker = BrokerProcess(1, tmp_path, {}, command_prefix=["sh", "-c", script, "sh"])
    broker.start(timeout=30)
    assert broker.wait(30) == 1
    tail = broker.output_tail()
    assert "listening on" in tail
    assert tail.rstrip().endswith("broker failed: the reason")
