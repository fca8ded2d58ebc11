"""Start a real ``tidelog serve`` process (ephemeral port, temp dir), one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_process import ServeProcess


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path_factory.mktemp("serve")).start()
    yield proc
    rc = proc.stop()
    assert rc == 0, "".join(proc.stderr_lines[-30:])
    # a handler that failed closes its connection and logs ERROR; clients may have hidden it
    errors = [line for line in proc.stderr_lines if " ERROR " in line]
    assert not errors, "".join(errors[:20])
