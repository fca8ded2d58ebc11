"""Request decoding (through kio) and response framing; sans-I/O, bytes in, objects out.

* The request header is parsed by hand (it is tiny and hot) so that unknown header tags are
  skipped rather than raising; the body goes through kio's native reader.
* Bytes left after the body are ignored, never rejected: librdkafka <= 2.16 sends 3 junk
  bytes after all-topics Metadata v9+ requests (librdkafka #5049).
* kio raises ``KeyError('Unknown tagged field tag: N')`` for tags it does not know; that and
  every other parse failure becomes :class:`InvalidRequestError`.
"""

from __future__ import annotations

import functools
import io
import struct
from typing import Any, NamedTuple, cast

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from . import inter_broker
from .errors import ErrorCode
from .guard import check_bounds, strip_unknown_tags

API_VERSIONS_KEY = 18
_HDR = struct.Struct(">hhi")
_HDR_CLIENT = struct.Struct(">hhih")  # the header up to the client id's length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class InvalidRequestError(Exception):
    """A frame that cannot be decoded; the connection that sent it is closed."""


class UnsupportedVersionError(InvalidRequestError):
    def __init__(self, api_key: int, api_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        super().__init__(f"unsupported version {api_version} of API key {api_key}")


class RequestHeader(NamedTuple):
    """A request's header (a tuple: made for every request, it costs a fifth of a frozen
    dataclass)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidRequestError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise InvalidRequestError("varint too long")


def write_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


@functools.cache
def request_class(api_key: int, api_version: int) -> Any:
    """kio's request schema, or for the inter-broker APIs kio no longer carries, ours."""
    held = inter_broker.request_schema(api_key, api_version)
    if held is not None:
        return held
    try:
        return load_request_schema(api_key, api_version)
    except Exception:
        raise UnsupportedVersionError(api_key, api_version) from None


@functools.cache
def response_class(api_key: int, api_version: int) -> Any:
    held = inter_broker.response_schema(api_key, api_version)
    if held is not None:
        return held
    return load_response_schema(api_key, api_version)


@functools.cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


@functools.cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame body (without its length prefix)."""
    if len(frame) < 8:
        raise InvalidRequestError(f"frame of {len(frame)} bytes is shorter than a header")
    key, version, corr = _HDR.unpack_from(frame, 0)
    return int(key), int(version), int(corr)


def parse_header(frame: bytes | memoryview, header_version: int) -> tuple[RequestHeader, int]:
    end = len(frame)
    if end < 10:
        peek_header(frame)  # a frame shorter than a header says so
        raise InvalidRequestError("truncated client_id")
    key, version, corr, n = _HDR_CLIENT.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if end < pos + n:
            raise InvalidRequestError("truncated client_id")
        client_id = str(frame[pos : pos + n], "utf-8", "replace")
        pos += n
    if header_version >= 2:
        if pos < end and frame[pos] == 0:  # no tags (what every client sends)
            return RequestHeader(key, version, corr, client_id, header_version), pos + 1
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):  # skip every header tag: none is meaningful to a broker
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise InvalidRequestError("truncated header tagged fields")
    return RequestHeader(key, version, corr, client_id, header_version), pos


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode one frame body. Raises UnsupportedVersionError / InvalidRequestError."""
    key, version, _ = peek_header(frame)
    cls = request_class(key, version)
    header_version = 2 if cls.__header_schema__.__version__ >= 2 else 1
    header, pos = parse_header(frame, header_version)
    # a large frame arrives as a read-only view (no copy): the bound walkers only index,
    # slice and unpack, which a memoryview does as bytes do
    frame = cast(bytes, frame)
    try:
        check_bounds(cls, frame, pos)  # kio's native reader aborts on absurd lengths
        try:
            body, _size = _reader(cls)(frame, pos)
        except KeyError:  # kio: "Unknown tagged field tag: N" -> drop unknown tags, retry
            stripped = strip_unknown_tags(cls, frame, pos)
            if stripped is None:
                raise
            body, _size = _reader(cls)(stripped, pos)
    except Exception as exc:  # kio: ValueError, IndexError, BufferUnderflow, ...
        raise InvalidRequestError(
            f"cannot decode {cls.__name__} v{version} at byte {pos}: {exc!r}"
        ) from exc
    return header, body


def response_header_bytes(correlation_id: int, header_version: int) -> bytes:
    if header_version >= 1:
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Frame a kio response object: size prefix, response header, body."""
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    header_version = response.__header_schema__.__version__
    buf.write(response_header_bytes(correlation_id, header_version))
    writer: Any = _writer(type(response))  # type: ignore[arg-type]
    writer(buf, response)
    out = buf.getbuffer()
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def api_versions_fallback(correlation_id: int, api_min: int, api_max: int) -> bytes:
    """KIP-511: an ApiVersions v0 body with UNSUPPORTED_VERSION and our ApiVersions range,
    header v0, for a client that asked for an ApiVersions version we do not know."""
    body = struct.pack(
        ">ihihhh",
        correlation_id,
        ErrorCode.UNSUPPORTED_VERSION,
        1,
        API_VERSIONS_KEY,
        api_min,
        api_max,
    )
    return _I32.pack(len(body)) + body
