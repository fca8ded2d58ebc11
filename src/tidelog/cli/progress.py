"""A progress line for long command-line operations, on stderr and only at a terminal (a
redirected stderr or a pipe gets no carriage-return noise), redrawn at most every 0.5 s and
erased when done so the command's real output stays clean."""

from __future__ import annotations

import sys
import time
from typing import TextIO

MB = 1024 * 1024


class Progress:
    """``Progress("Reading x.log", total=size, unit="MB")``; ``update(done)``; ``close()``."""

    def __init__(
        self, label: str, total: int = 0, *, unit: str = "", stream: TextIO | None = None
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.last = 0.0
        self.drawn = False

    def _fmt(self, n: int) -> str:
        return f"{n / MB:,.1f}" if self.unit == "MB" else f"{n:,}"

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.5:
            return
        self.last = now
        text = f"{self.label}: {self._fmt(done)}"
        if self.total:
            pct = 100 * done / self.total
            text += f" / {self._fmt(self.total)} {self.unit} ({pct:.0f}%)".replace("  ", " ")
        elif self.unit:
            text += f" {self.unit}"
        self.stream.write(f"\r\x1b[K{text}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
