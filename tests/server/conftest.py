from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b
