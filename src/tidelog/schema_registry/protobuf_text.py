"""``.proto`` text from a ``FileDescriptorProto``: the canonical form the registry stores for
a Protobuf schema (what Confluent's registry stores and returns), printed the same way
whichever form the schema came in."""

from __future__ import annotations

import json

from google.protobuf import descriptor_pb2 as d
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto

F = d.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}
FILE_OPTIONS = ("java_package", "java_outer_classname", "go_package", "csharp_namespace",
                "objc_class_prefix", "php_namespace", "ruby_package", "swift_prefix")


def _type_name(field: d.FieldDescriptorProto) -> str:
    if field.type in SCALARS:
        return SCALARS[field.type]
    name: str = field.type_name  # fully qualified, with its leading dot
    return name


def _field(field: d.FieldDescriptorProto, maps: dict[str, d.DescriptorProto], proto3: bool) -> str:
    entry = maps.get(field.type_name)
    if entry is not None:
        key, value = entry.field[0], entry.field[1]
        return f"map<{_type_name(key)}, {_type_name(value)}> {field.name} = {field.number};"
    if field.label == F.LABEL_REPEATED:
        label = "repeated "
    elif field.label == F.LABEL_REQUIRED:
        label = "required "
    elif field.proto3_optional or not proto3:
        label = "optional "
    else:
        label = ""
    options = []
    if field.HasField("default_value"):
        text = field.default_value
        quoted = field.type in (F.TYPE_STRING, F.TYPE_BYTES)
        options.append(f"default = {json.dumps(text) if quoted else text}")
    if field.options.HasField("packed"):
        options.append(f"packed = {str(field.options.packed).lower()}")
    tail = f" [{', '.join(options)}]" if options else ""
    return f"{label}{_type_name(field)} {field.name} = {field.number}{tail};"


def _enum(enum: d.EnumDescriptorProto, indent: str) -> list[str]:
    lines = [f"{indent}enum {enum.name} {{"]
    if enum.options.HasField("allow_alias"):
        lines.append(f"{indent}  option allow_alias = {str(enum.options.allow_alias).lower()};")
    lines += [f"{indent}  {v.name} = {v.number};" for v in enum.value]
    return [*lines, f"{indent}}}"]


def _reserved(msg: d.DescriptorProto, indent: str) -> list[str]:
    lines = []
    for r in msg.reserved_range:
        span = str(r.start) if r.end == r.start + 1 else f"{r.start} to {r.end - 1}"
        lines.append(f"{indent}reserved {span};")
    if msg.reserved_name:
        names = ", ".join(json.dumps(n) for n in msg.reserved_name)
        lines.append(f"{indent}reserved {names};")
    return lines


def _message(msg: d.DescriptorProto, prefix: str, indent: str, proto3: bool) -> list[str]:
    full = f"{prefix}.{msg.name}"
    maps = {f"{full}.{n.name}": n for n in msg.nested_type if n.options.map_entry}
    lines = [f"{indent}message {msg.name} {{", *_reserved(msg, indent + "  ")]
    oneofs: dict[int, list[str]] = {}
    for field in msg.field:
        text = _field(field, maps, proto3)
        if field.HasField("oneof_index") and not field.proto3_optional:
            oneofs.setdefault(field.oneof_index, []).append(text)
            if len(oneofs[field.oneof_index]) > 1:
                continue
            lines.append(f"{indent}  \0oneof{field.oneof_index}")
        else:
            lines.append(f"{indent}  {text}")
    for index, fields in oneofs.items():
        block = "\n".join(
            [f"{indent}  oneof {msg.oneof_decl[index].name} {{",
             *(f"{indent}    {f}" for f in fields), f"{indent}  }}"]
        )
        lines = [block if line == f"{indent}  \0oneof{index}" else line for line in lines]
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, full, indent + "  ", proto3)
    for enum in msg.enum_type:
        lines += _enum(enum, indent + "  ")
    return [*lines, f"{indent}}}"]


def print_proto(file: FileProto) -> str:
    proto3 = file.syntax == "proto3"
    lines = [f'syntax = "{file.syntax or "proto2"}";']
    if file.package:
        lines.append(f"package {file.package};")
    lines += [f"import {json.dumps(dep)};" for dep in file.dependency]
    for name in FILE_OPTIONS:
        if file.options.HasField(name):
            lines.append(f"option {name} = {json.dumps(getattr(file.options, name))};")
    if file.options.HasField("java_multiple_files"):
        lines.append(f"option java_multiple_files = {str(file.options.java_multiple_files).lower()};")
    prefix = f".{file.package}" if file.package else ""
    for msg in file.message_type:
        lines += _message(msg, prefix, "", proto3)
    for enum in file.enum_type:
        lines += _enum(enum, "")
    return "\n".join(lines) + "\n"
