"""The console tools' line reader and record formatter against the expectations of Kafka's own
tests for the same cases (LineMessageReaderTest, DefaultMessageFormatterTest)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import pytest

from tidelog.cli.consume import Formatter
from tidelog.cli.produce import LineError, LineReader


def reader(**props: str) -> LineReader:
    return LineReader.from_properties({k.replace("_", "."): v for k, v in props.items()}, [])


def test_plain_lines_are_values() -> None:
    assert reader().parse(b"key0\tvalue0", 1) == (None, b"key0\tvalue0", [])


def test_parse_key_and_headers() -> None:
    r = reader(parse_key="true", parse_headers="true")
    key, value, headers = r.parse(
        b"headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0", 1
    )
    assert (key, value) == (b"key0", b"value0")
    assert headers == [("headerKey0", b"headerValue0"), ("headerKey1", b"headerValue1")]


def test_missing_key_separator_names_the_line() -> None:
    r = reader(parse_key="true", key_separator=":")
    with pytest.raises(LineError) as e:
        r.parse(b"no separator here", 3)
    # LineMessageReader's message, word for word
    assert str(e.value) == "No key separator found on line number 3: 'no separator here'"
    assert reader(parse_key="true", ignore_error="true").parse(b"v", 1) == (None, b"v", [])


def test_null_marker() -> None:
    r = reader(parse_key="true", null_marker="<NULL>")
    assert r.parse(b"<NULL>\tvalue", 1) == (None, b"value", [])
    assert r.parse(b"key\t<NULL>", 1) == (b"key", None, [])


@dataclass
class Msg:
    """The parts of confluent_kafka.Message the formatter reads."""

    ts: tuple[int, int] = (0, -1)
    hdrs: list[tuple[str, bytes]] | None = None

    def timestamp(self) -> tuple[int, int]:
        return self.ts

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 123

    def headers(self) -> Any:
        return self.hdrs

    def key(self) -> bytes:
        return b"key"

    def value(self) -> bytes:
        return b"value"


def fmt(*props: str, **flags: Any) -> Formatter:
    ns = {f"print_{n}": False for n in ("key", "offset", "timestamp", "headers", "partition")}
    ns.update(property=list(props), key_separator=None, **flags)
    return Formatter.from_args(argparse.Namespace(**ns))


# DefaultMessageFormatterTest's expectations, in its order of enabling properties
@pytest.mark.parametrize(
    ("props", "msg", "expected"),
    [
        ((), Msg(), "value\n"),
        (("print.key=true",), Msg(), "key\tvalue\n"),
        (("print.key=true", "print.partition=true"), Msg(), "Partition:0\tkey\tvalue\n"),
        (
            (
                "print.key=true",
                "print.partition=true",
                "print.timestamp=true",
                "print.offset=true",
                "print.headers=true",
            ),
            Msg(),
            "NO_TIMESTAMP\tPartition:0\tOffset:123\tNO_HEADERS\tkey\tvalue\n",
        ),
        (
            (
                "print.key=true",
                "print.partition=true",
                "print.timestamp=true",
                "print.offset=true",
                "print.headers=true",
                "print.value=false",
            ),
            Msg((1, 123), [("h1", b"v1"), ("h2", b"v2")]),
            "CreateTime:123\tPartition:0\tOffset:123\th1:v1,h2:v2\tkey\n",
        ),
        (
            (
                "print.key=true",
                "print.partition=true",
                "print.timestamp=true",
                "print.offset=true",
                "print.headers=true",
                "print.value=false",
                "key.separator=<sep>",
                "line.separator=<end>",
                "headers.separator=|",
            ),
            Msg((1, 123), [("h1", b"v1"), ("h2", b"v2")]),
            "CreateTime:123<sep>Partition:0<sep>Offset:123<sep>h1:v1|h2:v2<sep>key<end>",
        ),
    ],
)
def test_formatter_matches_kafka(props: tuple[str, ...], msg: Msg, expected: str) -> None:
    assert fmt(*props).format(msg).decode() == expected


def test_log_append_time_and_shorthand_flags() -> None:
    f = fmt(print_timestamp=True, print_offset=True)
    assert f.format(Msg((2, 5))) == b"LogAppendTime:5\tOffset:123\tvalue\n"


def test_consumer_option_errors_are_kafkas(tmp_path: Any) -> None:
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "tidelog.cli.main", "consume", "--bootstrap-server",
               "127.0.0.1:1", "--topic", "t", *args]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    r = run("--group", "g", "--partition", "0")
    assert r.returncode == 1
    assert "tidelog consume: Options group and partition cannot be specified together." in r.stderr
    r = run("--offset", "5")
    assert "The partition is required when offset is specified." in r.stderr
