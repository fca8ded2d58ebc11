"""The RemoteStorageManager on a local directory and on a real S3 server (SeaweedFS): a real
closed segment copied, each object byte-identical to its file, ranged fetches, deletes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from remote_support import ClosedSegment, segment_files

from tidelog.records import iter_batches
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.metadata import uuid_to_str
from tidelog.storage.remote.object_key import main_path
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.storage.remote.storage_manager import IndexType, RemoteResourceNotFoundError
from tidelog.testing.seaweedfs import S3Bucket

PREFIX = "cluster-a/"


@pytest.fixture(params=["filesystem", "s3"])
def rsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RemoteStorageManager]:
    if request.param == "filesystem":
        root = tmp_path / "remote"
        root.mkdir()
        configs = {"rsm.config.storage.backend.class":
                   "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
                   "rsm.config.storage.root": str(root)}
    else:
        bucket: S3Bucket = request.getfixturevalue("s3_bucket")
        configs = dict(bucket.rsm_configs)
    configs["rsm.config.key.prefix"] = PREFIX
    manager = create_remote_storage_manager(configs)
    assert isinstance(manager, RemoteStorageManager)
    yield manager
    manager.close()


def _content(source: Path | bytes) -> bytes:
    return source if isinstance(source, bytes) else source.read_bytes()


def test_objects_are_the_segment_files_byte_for_byte(
        rsm: RemoteStorageManager, closed_segment: ClosedSegment) -> None:
    metadata, data = closed_segment.metadata, closed_segment.data
    assert rsm.copy_log_segment_data(metadata, data) is None
    tip = metadata.topic_id_partition
    expected_main = (f"orders-{uuid_to_str(tip.topic_id)}/3/00000000000000000000-"
                     f"{uuid_to_str(metadata.remote_log_segment_id.id)}")
    assert main_path(metadata) == expected_main
    files = segment_files(data)
    assert set(files) >= {"log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint"}
    for suffix, source in files.items():
        key = f"{PREFIX}{expected_main}.{suffix}"
        assert rsm.storage.fetch(key) == _content(source), key
    log_bytes = data.log_segment.read_bytes()
    assert len(log_bytes) == metadata.segment_size_in_bytes > 0
    batches = list(iter_batches(rsm.fetch_log_segment(metadata, 0)))
    assert batches[0].base_offset == 0 and batches[-1].last_offset == metadata.end_offset
    assert rsm.fetch_index(metadata, IndexType.OFFSET) == data.offset_index.read_bytes()
    assert rsm.fetch_index(metadata, IndexType.LEADER_EPOCH) == data.leader_epoch_index


def test_ranged_fetch_is_inclusive_and_clipped(
        rsm: RemoteStorageManager, closed_segment: ClosedSegment) -> None:
    metadata, data = closed_segment.metadata, closed_segment.data
    rsm.copy_log_segment_data(metadata, data)
    log_bytes = data.log_segment.read_bytes()
    size = len(log_bytes)
    assert rsm.fetch_log_segment(metadata, 100, 199) == log_bytes[100:200]
    assert rsm.fetch_log_segment(metadata, 5000) == log_bytes[5000:]
    assert rsm.fetch_log_segment(metadata, size - 10, size + 1000) == log_bytes[-10:]
    assert rsm.fetch_log_segment(metadata, size) == b""
    with pytest.raises(ValueError):
        rsm.fetch_log_segment(metadata, 10, 9)


def test_missing_objects_and_delete(
        rsm: RemoteStorageManager, closed_segment: ClosedSegment) -> None:
    metadata, data = closed_segment.metadata, closed_segment.data
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(metadata, 0)
    rsm.copy_log_segment_data(metadata, data)
    if data.transaction_index is None:
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_index(metadata, IndexType.TRANSACTION)
    rsm.delete_log_segment_data(metadata)
    for index_type in IndexType:
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_index(metadata, index_type)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(metadata, 0, 10)
    rsm.delete_log_segment_data(metadata)  # again: already gone is not an error


def test_downloaded_objects_read_with_dump_log(
        rsm: RemoteStorageManager, closed_segment: ClosedSegment, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The ``.log``, ``.index`` and ``.timeindex`` objects saved under their object names
    are read by ``tidelog dump-log``."""
    from tidelog.cli.main import main

    metadata = closed_segment.metadata
    rsm.copy_log_segment_data(metadata, closed_segment.data)
    download = tmp_path / "download"
    download.mkdir()
    paths = []
    for key in (rsm.keys.log_key(metadata), rsm.keys.index_key(metadata, IndexType.OFFSET),
                rsm.keys.index_key(metadata, IndexType.TIMESTAMP)):
        path = download / key.rsplit("/", 1)[1]
        path.write_bytes(rsm.storage.fetch(key))
        paths.append(str(path))
    code = _run(main, ["dump-log", "--files", ",".join(paths)])
    out = capsys.readouterr().out
    assert code in (0, None), out
    assert "ERROR" not in out, out
    assert f"lastOffset: {metadata.end_offset}" in out
    assert "offset: " in out.split(".timeindex")[0].split(".index")[1]


def _run(main: Callable[[list[str]], int | None], argv: list[str]) -> int | None:
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def test_large_file_is_byte_identical_on_s3(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """A file above the single-PUT size goes up as a multipart upload and comes back equal,
    whole and in ranges across part boundaries."""
    import os

    manager = create_remote_storage_manager(s3_bucket.rsm_configs)
    assert isinstance(manager, RemoteStorageManager)
    big = tmp_path / "big.log"
    content = os.urandom(11 * 1024 * 1024 + 123)
    big.write_bytes(content)
    assert manager.storage.upload("big/00000000000000000000.log", big) == len(content)
    assert manager.storage.fetch("big/00000000000000000000.log") == content
    edge = 5 * 1024 * 1024
    assert manager.storage.fetch("big/00000000000000000000.log", (edge - 10, edge + 9)) == \
        content[edge - 10:edge + 10]
    manager.close()
