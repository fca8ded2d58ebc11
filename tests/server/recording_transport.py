"""A transport that keeps what a KafkaConnection writes and checks its read pausing: the
connection tests drive the protocol by hand through it."""

from __future__ import annotations

from typing import Any


class RecordingTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False
        self.pauses = 0

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        self.written.extend(bytes(c) for c in chunks)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        assert not self.paused
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        assert self.paused
        self.paused = False

    def is_closing(self) -> bool:
        return False

    def close(self) -> None: ...

    def abort(self) -> None: ...
