"""``tidelog``'s last line of defence: whatever a command lets escape ends as one line naming
it and exit 1, including confluent-kafka's KafkaError raised by itself (no Exception: an
``except Exception`` lets it through to a traceback)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

import tidelog.cli.topics as topics
from tidelog.cli.main import main

FATAL = "Fatal error: Broker: Cluster authorization failed"


def _raise_bare(args: Any) -> int:
    raise KafkaError(KafkaError._FATAL, FATAL, fatal=True)  # type: ignore[misc]


def _raise_wrapped(args: Any) -> int:
    raise KafkaException(KafkaError(KafkaError._FATAL, FATAL, fatal=True))


def _raise_timeout(args: Any) -> int:
    raise TimeoutError()


@pytest.mark.parametrize("command,line", [
    (_raise_bare, f"tidelog topics: {FATAL} (_FATAL)"),
    (_raise_wrapped, f"tidelog topics: {FATAL} (_FATAL)"),
    (_raise_timeout, "tidelog topics: TimeoutError"),
])
def test_an_escaping_error_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str],
                                       command: Any, line: str) -> None:
    monkeypatch.setattr(topics, "run", command)
    try:
        rc = main(["topics", "--list"])
    except:  # noqa: E722 - escaped (a bare KafkaError would end pytest itself)
        raise AssertionError(f"escaped main: {sys.exc_info()[1]!r}") from None
    assert rc == 1
    assert capsys.readouterr().err == line + "\n"


def test_debug_lets_a_bare_kafka_error_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics, "run", _raise_bare)
    try:
        main(["--debug", "topics", "--list"])
    except:  # noqa: E722 - a KafkaError is no BaseException
        assert isinstance(sys.exc_info()[1], KafkaError)
    else:
        raise AssertionError("--debug swallowed the error")
