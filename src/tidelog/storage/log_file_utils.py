"""Segment file names: Kafka's ``LogFileUtils`` (storage/internals/log/LogFileUtils.java).

A segment is four files named by its base offset zero-padded to 20 digits, each with its
suffix; a suffix after that (``.deleted``, ``.cleaned``, ``.swap``) marks a file on its way
out or in.
"""

from __future__ import annotations

from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"


def filename_prefix_from_offset(offset: int) -> str:
    """The offset zero-padded to 20 digits: 0 -> "00000000000000000000"."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    """The offset in a segment or snapshot file name (the text before the first ".")."""
    return int(name.split(".", 1)[0])


def log_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return Path(dir) / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return Path(dir) / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return Path(dir) / f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def transaction_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return Path(dir) / f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def replace_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    name = str(path)
    if not name.endswith(old_suffix):
        raise ValueError(f"Expected string to end with {old_suffix!r} but string is {name!r}")
    return Path(name[: len(name) - len(old_suffix)] + new_suffix)
