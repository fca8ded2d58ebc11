"""kio glue for the client: build per-version request objects from plain dicts, frame them,
and decode responses.

kio has one frozen dataclass per API version (and per nested struct). ``build`` takes the
same keyword arguments for every version: keys the version lacks are dropped, nested dicts
and lists become the version's nested classes, required fields left out are zero-filled, and
millisecond ints become the ``timedelta`` that kio's ``timedelta_i32`` fields hold.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid
from functools import cache
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.protocol.codec import request_class as _schema_of_request
from tidelog.protocol.codec import response_class as _schema_of_response

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "string": "",
    "bool": False,
    "uuid": uuid.UUID(int=0),
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "records": None,
    "bytes": b"",
}
_SIZE = struct.Struct(">i")


def _entity_of(tp: Any) -> type | None:
    """The dataclass inside ``X``, ``X | None`` or ``tuple[X, ...]``, if any."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        found = _entity_of(arg)
        if found is not None:
            return found
    return None


def _is_optional(tp: Any) -> bool:
    return isinstance(tp, types.UnionType) and type(None) in typing.get_args(tp)


def _is_tuple(tp: Any) -> bool:
    base = typing.get_args(tp)[0] if _is_optional(tp) else tp
    return typing.get_origin(base) is tuple


def _convert(field: dataclasses.Field[Any], value: Any) -> Any:
    kafka_type = field.metadata.get("kafka_type", "")
    if value is None:
        return None
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    entity = _entity_of(field.type)
    if entity is not None:
        if isinstance(value, dict):
            return build(entity, **value)
        if isinstance(value, (list, tuple)):
            return tuple(build(entity, **v) if isinstance(v, dict) else v for v in value)
        return value
    if isinstance(value, list):
        return tuple(value)
    return value


def _zero(field: dataclasses.Field[Any]) -> Any:
    if _is_tuple(field.type):
        return ()
    if _is_optional(field.type):
        return None
    return _ZERO_BY_KAFKA_TYPE.get(field.metadata.get("kafka_type", ""), 0)


def build(cls: type, **kwargs: Any) -> Any:
    """An instance of the kio class ``cls`` (see the module docstring)."""
    values: dict[str, Any] = {}
    for f in _fields(cls):
        if f.name in kwargs:
            values[f.name] = _convert(f, kwargs[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = _zero(f)
    return cls(**values)


@cache
def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(cls)


@cache
def _request_codec(api_key: int, version: int) -> tuple[type, Any, Any, Any]:
    req: Any = _schema_of_request(api_key, version)  # kio's, or protocol.inter_broker's
    header = req.__header_schema__
    return req, header, entity_writer(header), entity_writer(req)


@cache
def _response_codec(api_key: int, version: int) -> tuple[Any, Any]:
    resp: Any = _schema_of_response(api_key, version)
    return entity_reader(resp.__header_schema__), entity_reader(resp)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, body: dict[str, Any] | Any
) -> bytes:
    """A size-prefixed request frame; ``body`` is a dict for :func:`build` or a request
    object of the version's class."""
    req, header_cls, write_header, write_body = _request_codec(api_key, version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    header = header_cls(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    write_header(out, header)
    write_body(out, build(req, **body) if isinstance(body, dict) else body)
    frame = out.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response object) of a frame without its size prefix."""
    read_header, read_body = _response_codec(api_key, version)
    header, used = read_header(payload, 0)
    body, _ = read_body(payload, used)  # trailing bytes are tolerated, like Kafka's clients
    return int(header.correlation_id), body


def request_class(api_key: int, version: int) -> type:
    return _request_codec(api_key, version)[0]
