"""meta.properties is checked strictly at start-up (as Kafka does): garbage, another cluster.id
or another node.id stops ``tidelog serve`` with one ERROR line naming the file and the
mismatch, and nothing in the dir is changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidelog.server.meta_properties import (
    MetaPropertiesError,
    parse_meta_properties,
    verify_meta_properties,
)

GOOD = "#\nversion=1\ncluster.id=AbCdEfGhIjKlMnOpQrStUv\nnode.id=1\ndirectory.id=x\n"


def _serve(log_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tidelog.cli.main", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={log_dir}"]
    for o in overrides:
        cmd += ["--override", o]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("text", "overrides", "expect"),
    [
        (GOOD.replace("node.id=1", "node.id=2"), ["node.id=1"], "Stored node id 2"),
        (GOOD, ["cluster.id=ZZZZZZZZZZZZZZZZZZZZZZ"], "Invalid cluster.id"),
        ("\x00\x01garbage\xff\n", [], "line 1 is not key=value"),
        ("version=7\ncluster.id=a\nnode.id=1\n", [], "unsupported version"),
        ("version=1\ncluster.id=a\nnode.id=one\n", [], "invalid node.id"),
    ],
)
def test_bad_meta_properties_stops_start_up(
    tmp_path: Path, text: str, overrides: list[str], expect: str
) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(text.encode("latin-1"))
    res = _serve(tmp_path, *overrides)
    assert res.returncode != 0
    errors = [ln for ln in res.stderr.splitlines() if " ERROR " in ln]
    assert len(errors) == 1, res.stderr
    assert expect in errors[0] and str(path) in errors[0], errors
    assert "Traceback" not in res.stderr
    assert path.read_bytes() == text.encode("latin-1")  # left as found


def test_dirs_of_two_clusters_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "meta.properties").write_text(GOOD)
    (b / "meta.properties").write_text(GOOD.replace("AbCd", "WxYz"))
    with pytest.raises(MetaPropertiesError, match=r"Invalid cluster.id in .*b/meta.properties"):
        verify_meta_properties([a, b], 1, "")
    assert verify_meta_properties([a], 1, "") == "AbCdEfGhIjKlMnOpQrStUv"


def test_a_kafka_written_file_parses(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Tue Nov 24 04:00:00 UTC 2026\n" + GOOD)
    assert parse_meta_properties(path)["node.id"] == "1"
