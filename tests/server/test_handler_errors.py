"""A handler that fails answers UNKNOWN_SERVER_ERROR where the response has a top-level error
code (as Kafka does) and the connection keeps serving; otherwise only that connection closes.

A handler bug can't be caused for real, so the failing handler is injected into the registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from broker_wire import Wire, connect, recv_frame, request_frame

from tidelog.protocol.errors import ErrorCode
from tidelog.testing.embedded import EmbeddedBroker

HEARTBEAT, METADATA = 12, 3


async def _boom(ctx: object, request: object) -> object:
    raise RuntimeError("injected handler bug")


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        registry = b.broker.registry
        for key in (HEARTBEAT, METADATA):
            spec = registry._specs[key]
            registry._specs[key] = dataclasses.replace(spec, handle=_boom)
        yield b


def test_top_level_error_code_answers_and_connection_survives(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        resp = w.call(HEARTBEAT, 3, group_id="g", generation_id=1, member_id="m",
                      group_instance_id=None)
        assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
        again = w.call(18, 3, client_software_name="t", client_software_version="1")
        assert again.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def test_without_top_level_error_code_only_that_connection_closes(broker: EmbeddedBroker) -> None:
    bad = connect(broker)
    bad.sendall(request_frame(METADATA, 1, 1, topics=None))
    with pytest.raises((ConnectionError, OSError)):
        recv_frame(bad)
    bad.close()
    with Wire(broker) as w:  # the broker itself is fine
        ok = w.call(18, 3, client_software_name="t", client_software_version="1")
        assert ok.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
