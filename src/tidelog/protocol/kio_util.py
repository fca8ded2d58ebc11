"""Helpers that let one handler build kio's per-version response classes.

kio generates one frozen dataclass per API version (and per nested struct). ``make(cls, **kw)``
drops keyword arguments the version lacks, converts plain ints to kio's timedelta/datetime
wrappers, and zero-fills required fields the caller did not give, so a handler writes one
``make(...)`` call for every version it serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@functools.cache
def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls)}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_optional(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _strip_optional(tp: Any) -> Any:
    if _is_optional(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0]
    return tp


def _zero(f: dataclasses.Field[Any], tp: Any) -> Any:
    if _is_optional(tp):
        return None
    kafka_type = f.metadata.get("kafka_type", "")
    if typing.get_origin(tp) is tuple:
        return ()
    if kafka_type == "error_code":
        return KioErrorCode(0)
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return _EPOCH
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, int):
            return tp(0)
        if issubclass(tp, float):  # f64 (client quota values)
            return tp(0.0)
        if issubclass(tp, str):
            return tp("")
        if issubclass(tp, bytes):
            return tp(b"")
        if issubclass(tp, uuid.UUID):
            return uuid.UUID(int=0)
        if dataclasses.is_dataclass(tp):
            return make(tp)
    raise TypeError(f"no zero value for {f.name}: {tp!r}")


def _convert(f: dataclasses.Field[Any], value: Any) -> Any:
    kafka_type = f.metadata.get("kafka_type", "")
    if isinstance(value, int) and not isinstance(value, bool):
        if kafka_type == "error_code":
            return KioErrorCode(int(value))
        if kafka_type.startswith("timedelta"):
            return datetime.timedelta(milliseconds=value)
        if kafka_type.startswith("datetime"):
            return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def make(cls: type, **kw: Any) -> Any:
    """Instantiate kio class ``cls`` from ``kw``, ignoring fields this version lacks."""
    fields = _fields(cls)
    hints = _hints(cls)
    args: dict[str, Any] = {}
    for name, f in fields.items():
        if name in kw:
            args[name] = _convert(f, kw[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            args[name] = _zero(f, hints[name])
    return cls(**args)


def has_field(cls: type, name: str) -> bool:
    return name in _fields(cls)


@functools.cache
def nested(cls: type, name: str) -> type:
    """The element class of tuple field ``name`` (or the class of a struct field)."""
    tp = _strip_optional(_hints(cls)[name])
    if typing.get_origin(tp) is tuple:
        tp = typing.get_args(tp)[0]
    return typing.cast(type, tp)


_ONE_MS = datetime.timedelta(milliseconds=1)


def ms(value: Any) -> int:
    """Milliseconds of a kio timedelta/datetime field (or a plain int)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH) / datetime.timedelta(milliseconds=1))
    return int(value)
