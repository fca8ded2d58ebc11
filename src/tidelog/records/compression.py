"""Codec registry for the five Kafka codecs (CompressionType), through well-kept libraries.

Every decompressor takes ``max_size`` and stops with UnsupportedCompressionError as soon as the
output would exceed it, so a tiny compressed "bomb" cannot exhaust memory.

The codec libraries (cramjam, lz4, zstandard) are imported by the first batch that uses
them: a broker whose producers do not compress never loads them, and its start-up does not
wait for them.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

from .errors import UnsupportedCompressionError

# Default bound on one batch's decompressed records; Kafka's own limit on a batch is
# max.message.bytes (1 MiB) compressed, and real ratios stay well below 100x.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024
# The bound for a batch a producer sends (validation): max.message.bytes (1 MiB) at a 64x
# ratio, far above real data (text compresses ~5-20x) and far below a bomb (~1000x). A batch
# inflating beyond it is INVALID_RECORD, detected after holding at most this many bytes.
MAX_DECOMPRESSED_BATCH = 64 * 1024 * 1024

# xerial snappy-java framing, which the Java client writes (SnappyOutputStream).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        return "none" if self is CompressionType.NONE else self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        key = name.strip().lower()
        if key in ("none", "uncompressed"):
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise UnsupportedCompressionError(f"unknown compression type {name!r}") from None


def _too_big(max_size: int) -> UnsupportedCompressionError:
    return UnsupportedCompressionError(f"decompressed size exceeds the bound of {max_size} bytes")


def _gzip_compress(data: bytes, level: int | None) -> bytes:
    lvl = -1 if level is None else level
    c = zlib.compressobj(lvl, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: bytes, max_size: int) -> bytes:
    d = zlib.decompressobj(47)  # 32+15: accept gzip or zlib headers
    try:
        out = d.decompress(data, max_size + 1)
    except zlib.error as e:
        raise UnsupportedCompressionError(f"gzip: {e}") from None
    if len(out) > max_size or d.unconsumed_tail:
        raise _too_big(max_size)
    return out


def _snappy_compress(data: bytes, level: int | None) -> bytes:
    # Write the xerial framing like the Java client; every client reads it.
    import cramjam

    out = bytearray(XERIAL_HEADER)
    for i in range(0, len(data), XERIAL_BLOCK) or [0]:
        block = bytes(cramjam.snappy.compress_raw(data[i : i + XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _snappy_raw(block: bytes | memoryview, max_size: int) -> bytes:
    # The raw format starts with the uncompressed length as a varint: check it before allocating.
    n, shift, i = 0, 0, 0
    while i < len(block) and i < 5:
        b = block[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    if n > max_size:
        raise _too_big(max_size)
    import cramjam

    try:
        return bytes(cramjam.snappy.decompress_raw(bytes(block)))
    except Exception as e:
        raise UnsupportedCompressionError(f"snappy: {e}") from None


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, max_size)
    pos, out = 16, bytearray()
    mv = memoryview(data)
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise UnsupportedCompressionError("snappy: truncated xerial block")
        out += _snappy_raw(mv[pos : pos + n], max_size - len(out))
        pos += n
    return bytes(out)


def _lz4_compress(data: bytes, level: int | None) -> bytes:
    # Kafka's KafkaLZ4BlockOutputStream: independent 64 KiB blocks, no content size.
    import lz4.frame

    return bytes(
        lz4.frame.compress(
            data,
            compression_level=9 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )


def _lz4_decompress(data: bytes, max_size: int) -> bytes:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    # python-lz4 allocates max_length up front (64 MiB: ~25 us per small batch); LZ4 expands
    # at most ~255x, so the room a frame can need is bounded by its input too.
    room = min(max_size + 1, 256 * len(data) + 65536)
    try:
        out = d.decompress(data, max_length=room)
    except RuntimeError as e:
        raise UnsupportedCompressionError(f"lz4: {e}") from None
    if len(out) > max_size or (not d.eof and d.needs_input is False):
        raise _too_big(max_size)
    return bytes(out)


def _zstd_compress(data: bytes, level: int | None) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    try:
        with dctx.stream_reader(data) as r:
            while True:
                chunk = r.read(min(1 << 20, max_size + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
                if len(out) > max_size:
                    raise _too_big(max_size)
    except zstandard.ZstdError as e:
        raise UnsupportedCompressionError(f"zstd: {e}") from None
    return bytes(out)


_COMPRESSORS: dict[CompressionType, Callable[[bytes, int | None], bytes]] = {
    CompressionType.NONE: lambda d, _l: bytes(d),
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}

_DECOMPRESSORS: dict[CompressionType, Callable[[bytes, int], bytes]] = {
    CompressionType.NONE: lambda d, _m: bytes(d),
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}


def codec(code: int) -> CompressionType:
    try:
        return CompressionType(code)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec id {code}") from None


def compress(code: int, data: bytes, level: int | None = None) -> bytes:
    return _COMPRESSORS[codec(code)](data, level)


def decompress(code: int, data: bytes, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    return _DECOMPRESSORS[codec(code)](bytes(data), max_size)
