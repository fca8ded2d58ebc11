"""The progress line: drawn at a terminal only, erased when done."""

from __future__ import annotations

import io

from tidelog.cli.progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_drawn_at_a_terminal_and_erased() -> None:
    out = Tty()
    with Progress("Reading 0.log", 4 * 1024 * 1024, unit="MB", stream=out) as p:
        p.update(1024 * 1024)
        assert out.getvalue() == "\r\x1b[KReading 0.log: 1.0 / 4.0 MB (25%)"
        p.update(2 * 1024 * 1024)  # within 0.5 s of the last draw: not redrawn
        assert out.getvalue().count("Reading") == 1
    assert out.getvalue().endswith("\r\x1b[K")


def test_counts_without_a_total() -> None:
    out = Tty()
    p = Progress("Producing to t", unit="lines", stream=out)
    p.update(12345)
    assert out.getvalue() == "\r\x1b[KProducing to t: 12,345 lines"


def test_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Progress("x", 10, stream=out) as p:
        p.update(5)
    assert out.getvalue() == ""
