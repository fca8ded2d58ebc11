"""Protobuf schemas. Accepted as ``.proto`` text (compiled by protoc from ``grpcio-tools``
with the referenced files beside it) or as a base64 ``FileDescriptorProto``, the form
confluent-kafka's Python serializer sends. Either way the file is checked by building it in a
``DescriptorPool`` with its imports, stored as ``.proto`` text printed from the descriptor
(so both forms of one schema share an id), and served as a base64 descriptor for
``format=serialized``."""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import tempfile
from pathlib import Path

from google.protobuf import (  # noqa: F401 (the well-known types, loaded into the default pool)
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto
from google.protobuf.message import DecodeError

try:  # protoc, for schemas sent as .proto text (grpcio-tools is optional)
    from grpc_tools import protoc
except ImportError:  # pragma: no cover - base64 descriptors still work
    protoc = None

from .protobuf_compat import protobuf_differences
from .protobuf_text import print_proto
from .records import Reference
from .schema_types import PARSERS, InvalidSchema, ParsedSchema, Resolver

MAIN_FILE = "schema.proto"


def _well_known(name: str) -> FileProto | None:
    """google/protobuf/*.proto, which clients never register as references."""
    if not name.startswith("google/protobuf/"):
        return None
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    proto = FileProto()
    found.CopyToProto(proto)
    return proto


def _from_base64(text: str) -> FileProto | None:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    try:
        data = base64.b64decode(stripped, validate=True)
        proto = FileProto()
        proto.ParseFromString(data)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return proto


def _compile(text: str, files: dict[str, str]) -> FileProto:
    """Compile ``.proto`` text with protoc, the referenced files written beside it."""
    if protoc is None:
        raise InvalidSchema(
            "Invalid schema: .proto text needs grpcio-tools (or send a FileDescriptorProto)"
        )
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="tidelog-proto-") as tmp:
        root = Path(tmp)
        for name, body in {**files, MAIN_FILE: text}.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(body)
        out = root / "out.pb"
        args = ["protoc", f"-I{root}", f"-I{include}", f"--descriptor_set_out={out}", MAIN_FILE]
        if protoc.main(args) != 0 or not out.exists():
            raise InvalidSchema("Invalid schema: protoc could not compile the .proto text")
        descriptor_set = descriptor_pb2.FileDescriptorSet()
        descriptor_set.ParseFromString(out.read_bytes())
    return descriptor_set.file[0]


class ProtobufSchema(ParsedSchema):
    schema_type = "PROTOBUF"

    def __init__(self, text: str, references: list[Reference], resolve: Resolver) -> None:
        super().__init__(references)
        self.dependencies: dict[str, FileProto] = {}
        sources: dict[str, str] = {}
        self._load_references(references, resolve, sources)
        proto = _from_base64(text)
        self.file = proto if proto is not None else _compile(text, sources)
        self.file.name = MAIN_FILE
        self._check()
        self._canonical = print_proto(self.file)

    def _load_references(
        self, references: list[Reference], resolve: Resolver, sources: dict[str, str]
    ) -> None:
        for ref in references:
            if ref.name in self.dependencies:
                continue
            value = resolve(ref)
            parsed = ProtobufSchema(value.schema, value.references, resolve)
            self.dependencies.update(parsed.dependencies)
            dependency = FileProto()
            dependency.CopyFrom(parsed.file)
            dependency.name = ref.name
            self.dependencies[ref.name] = dependency
            sources[ref.name] = value.schema if _from_base64(value.schema) is None else (
                parsed.canonical()
            )
            sources.update({k: print_proto(v) for k, v in parsed.dependencies.items()})

    def _check(self) -> None:
        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(proto: FileProto) -> None:
            if proto.name in added:
                return
            for dep in proto.dependency:
                found = self.dependencies.get(dep) or _well_known(dep)
                if found is None:
                    raise InvalidSchema(f"Invalid schema: import {dep!r} is not a reference")
                add(found)
            added.add(proto.name)
            pool.Add(proto)

        try:
            add(self.file)
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from exc

    def canonical(self) -> str:
        return self._canonical

    def formatted(self, fmt: str) -> str:
        if fmt == "serialized":
            return base64.b64encode(self.file.SerializeToString()).decode("ascii")
        return self._canonical

    def backward_errors(self, previous: ParsedSchema, reader: str, writer: str) -> list[str]:
        if not isinstance(previous, ProtobufSchema):
            return ["Incompatible because of different schema type"]
        return protobuf_differences(previous.file, self.file, reader, writer)


def parse_protobuf(text: str, references: list[Reference], resolve: Resolver) -> ParsedSchema:
    return ProtobufSchema(text, references, resolve)


PARSERS["PROTOBUF"] = parse_protobuf
