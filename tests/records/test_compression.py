"""Codec registry: round trips, the xerial snappy framing, and the decompression bound."""

from __future__ import annotations

import cramjam
import pytest

from tidelog.records import CompressionType, UnsupportedCompressionError, compress, decompress

DATA = b"tidelog " * 10_000


@pytest.mark.parametrize("codec", list(CompressionType))
def test_round_trip(codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, DATA)) == DATA


def test_snappy_reads_raw_and_xerial() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(CompressionType.SNAPPY, raw) == DATA
    framed = compress(CompressionType.SNAPPY, DATA)
    assert framed.startswith(b"\x82SNAPPY\x00")


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_bomb_is_bounded(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    assert len(bomb) < 1024 * 1024
    with pytest.raises(UnsupportedCompressionError, match="bound"):
        decompress(codec, bomb, max_size=1024 * 1024)


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"x")
    assert CompressionType.from_name("uncompressed") is CompressionType.NONE
    assert CompressionType.from_name("ZSTD") is CompressionType.ZSTD


@pytest.mark.parametrize("size", [0, 1, 64 * 1024, 8 * 1024 * 1024])
def test_lz4_at_its_highest_ratio_still_decompresses(size: int) -> None:
    """LZ4's room is bounded by its input (~255x at most): zeros, its best case, fit."""
    data = bytes(size)
    packed = compress(CompressionType.LZ4, data)
    assert decompress(CompressionType.LZ4, packed) == data
    assert decompress(CompressionType.LZ4, packed + b"trailing") == data
