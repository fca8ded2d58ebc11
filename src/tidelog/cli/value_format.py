"""``--value-format avro|json|protobuf`` for ``tidelog produce`` and ``tidelog consume``,
as Confluent's kafka-avro-console-producer / -consumer (and their JSON Schema and Protobuf
siblings) do: each input line is a JSON document encoded with the given schema through
confluent-kafka's serializers (Confluent's framing, the schema registered under
``<topic>-value`` or given by id); on the way out each value is decoded with its writer
schema from the registry and printed as JSON."""

from __future__ import annotations

import argparse
import base64
import importlib.resources
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.cli.client_config import CliError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from google.protobuf.message import Message

Codec = Callable[[bytes | None], bytes | None]
# The registry client, the serializers, protobuf and protoc come with confluent-kafka's
# schemaregistry extras and tidelog[schema-registry]: they are imported when a
# --value-format needs them, so `tidelog produce` and `consume` of plain bytes (and a plain
# install) never load them.
FORMATS = ("bytes", "avro", "json", "protobuf")


def add_value_format_args(p: argparse.ArgumentParser, producing: bool) -> None:
    p.add_argument("--value-format", choices=FORMATS, default="bytes",
                   help="values in Confluent's framing, through the Schema Registry")
    p.add_argument("--schema-registry", default=os.environ.get(
        "TIDELOG_SCHEMA_REGISTRY", "http://localhost:8081"), metavar="URL",
        help="registry URL (default $TIDELOG_SCHEMA_REGISTRY or localhost:8081)")
    if producing:
        p.add_argument("--value-schema", metavar="TEXT|@FILE",
                       help="the value schema (registered under <topic>-value)")
        p.add_argument("--value-schema-id", type=int, help="use this registered schema")
        p.add_argument("--value-message", help="Protobuf: the message type (default: first)")


class NotJsonError(ValueError):
    """An input line that is not a JSON document (before any schema is asked)."""


def _json(line: bytes) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise NotJsonError(f"{exc.msg} at column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise NotJsonError(f"not UTF-8 text at byte {exc.start}") from None


def _registry(url: str) -> SchemaRegistryClient:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": url})


def _schema_text(args: argparse.Namespace, client: SchemaRegistryClient) -> str:
    if args.value_schema_id is not None:
        return str(client.get_schema(args.value_schema_id).schema_str)
    text = args.value_schema
    if not text:
        raise CliError(f"--value-format {args.value_format} needs --value-schema or "
                       "--value-schema-id")
    return Path(text[1:]).read_text() if text.startswith("@") else str(text)


def _proto_class(text: str, message: str | None) -> type[Message]:
    """A message class compiled from .proto text with protoc (grpcio-tools)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    include = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "value.proto").write_text(text)
        out = Path(tmp) / "set.pb"
        if protoc.main(["protoc", f"-I{tmp}", f"-I{include}", f"--descriptor_set_out={out}",
                        "--include_imports", "value.proto"]) != 0:
            raise CliError("--value-schema: protoc could not compile the .proto text")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    main = files.file[-1]
    name = message or main.message_type[0].name
    full = f"{main.package}.{name}" if main.package and "." not in name else name
    cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return cls


def value_serializer(args: argparse.Namespace) -> Codec | None:
    """Encodes one input line (a JSON document) into a framed value, or None for bytes."""
    if args.value_format == "bytes":
        return None
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = _registry(args.schema_registry)
    text = _schema_text(args, client)
    conf: dict[str, Any] = {}
    if args.value_schema_id is not None:
        conf = {"auto.register.schemas": False, "use.schema.id": args.value_schema_id}
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    if args.value_format == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        avro = AvroSerializer(client, text, conf=conf)
        return lambda line: None if line is None else avro(_json(line), ctx)
    if args.value_format == "json":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        js = JSONSerializer(text, client, conf=conf)
        return lambda line: None if line is None else js(_json(line), ctx)
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import json_format

    cls = _proto_class(text, args.value_message)
    pb = ProtobufSerializer(cls, client, {"use.deprecated.format": False, **conf})
    return lambda line: None if line is None else pb(json_format.ParseDict(_json(line), cls()),
                                                     ctx)


def value_deserializer(args: argparse.Namespace) -> Codec | None:
    """Decodes a framed value into one line of JSON, or None for bytes."""
    if args.value_format == "bytes":
        return None
    client = _registry(args.schema_registry)
    if args.value_format == "protobuf":
        decode = _ProtobufJson(client)
        return lambda data: None if data is None else decode(data)
    if args.value_format == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        des: Any = AvroDeserializer(client)
    else:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        des = JSONDeserializer(None, schema_registry_client=client)

    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(args.topic or "", MessageField.VALUE)

    def decode_json(data: bytes | None) -> bytes | None:
        if data is None:
            return None
        return json.dumps(des(data, ctx), default=str, ensure_ascii=False).encode()

    return decode_json


class _ProtobufJson:
    """Protobuf values to JSON with no generated class: the writer's file descriptor (and
    its references) from the registry, built into a pool per schema id."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client
        self.classes: dict[tuple[int, tuple[int, ...]], type[Message]] = {}

    def __call__(self, data: bytes) -> bytes:
        from google.protobuf import json_format
        from google.protobuf.internal.decoder import _DecodeVarint

        if len(data) < 6 or data[0] != 0:
            raise ValueError("the value lacks Confluent's framing")
        schema_id = int.from_bytes(data[1:5], "big")
        pos, indexes = 5, []
        count, pos = _DecodeVarint(data, pos)
        for _ in range(_zigzag(count)):
            index, pos = _DecodeVarint(data, pos)
            indexes.append(_zigzag(index))
        cls = self._class(schema_id, tuple(indexes or [0]))
        text: str = json_format.MessageToJson(cls.FromString(data[pos:]), indent=None)
        return text.encode()

    def _class(self, schema_id: int, path: tuple[int, ...]) -> type[Message]:
        key = (schema_id, path)
        if key not in self.classes:
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            pool = descriptor_pool.DescriptorPool()
            schema = self.client.get_schema(schema_id, fmt="serialized")
            self._add(pool, schema, "value.proto", set())
            file = pool.FindFileByName("value.proto")
            desc = file.message_types_by_name[
                descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(
                    str(schema.schema_str))).message_type[path[0]].name]
            for i in path[1:]:
                desc = desc.nested_types[i]
            self.classes[key] = message_factory.GetMessageClass(desc)
        return self.classes[key]

    def _add(self, pool: Any, schema: Schema, name: str, seen: set[str]) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool

        for ref in schema.references or []:
            ref_name, subject, version = str(ref.name), str(ref.subject), int(ref.version or 0)
            if ref_name in seen:
                continue
            seen.add(ref_name)
            dep = self.client.get_version(subject, version, False, "serialized")
            self._add(pool, dep.schema, ref_name, seen)
        proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(str(schema.schema_str)))
        proto.name = name
        for dep_name in proto.dependency:
            if dep_name.startswith("google/protobuf/") and dep_name not in seen:
                seen.add(dep_name)
                well_known = descriptor_pb2.FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(dep_name).CopyToProto(well_known)
                pool.Add(well_known)
        pool.Add(proto)


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)
