"""Protobuf compatibility by Confluent's rules (its protobuf ``SchemaDiff``): messages are
matched by full name and fields by number; adding or removing optional fields, renaming
fields and changing enums are compatible; a removed message, a field's kind (scalar, message,
map) or scalar group changed (varint, zigzag, fixed32, fixed64, length-delimited), a message
field's type changed, a required field added or removed, a oneof field removed, or fields moved
into a oneof are not."""

from __future__ import annotations

from google.protobuf import descriptor_pb2 as d

F = d.FieldDescriptorProto
GROUPS = {
    F.TYPE_INT32: "GENERAL_NUMBER", F.TYPE_INT64: "GENERAL_NUMBER",
    F.TYPE_UINT32: "GENERAL_NUMBER", F.TYPE_UINT64: "GENERAL_NUMBER",
    F.TYPE_BOOL: "GENERAL_NUMBER", F.TYPE_ENUM: "GENERAL_NUMBER",
    F.TYPE_SINT32: "SIGNED_NUMBER", F.TYPE_SINT64: "SIGNED_NUMBER",
    F.TYPE_FIXED32: "FIXED32", F.TYPE_SFIXED32: "FIXED32",
    F.TYPE_FIXED64: "FIXED64", F.TYPE_SFIXED64: "FIXED64",
    F.TYPE_FLOAT: "FLOAT", F.TYPE_DOUBLE: "DOUBLE",
    F.TYPE_STRING: "STRING_OR_BYTES", F.TYPE_BYTES: "STRING_OR_BYTES",
}
DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package "
    "in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not match "
    "the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the %s schema "
    "does not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the %s schema "
    "does not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the %s "
    "schema does not match its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in "
    "the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in "
    "the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s "
    "schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the %s "
    "schema are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the %s schema is "
    "outside an existing oneof in the %s schema",
}


def _messages(file: d.FileDescriptorProto) -> dict[str, d.DescriptorProto]:
    found: dict[str, d.DescriptorProto] = {}

    def walk(msgs: list[d.DescriptorProto], prefix: str) -> None:
        for m in msgs:
            found[f"{prefix}.{m.name}"] = m
            walk(list(m.nested_type), f"{prefix}.{m.name}")

    walk(list(file.message_type), f".{file.package}" if file.package else "")
    return found


def _kind(field: d.FieldDescriptorProto, messages: dict[str, d.DescriptorProto]) -> str:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        target = messages.get(field.type_name)
        return "MAP" if target is not None and target.options.map_entry else "MESSAGE"
    return "SCALAR"


def _oneof(msg: d.DescriptorProto, field: d.FieldDescriptorProto) -> str | None:
    if field.HasField("oneof_index") and not field.proto3_optional:
        return str(msg.oneof_decl[field.oneof_index].name)
    return None


class _Diff:
    def __init__(self, old: d.FileDescriptorProto, new: d.FileDescriptorProto) -> None:
        self.old, self.new = _messages(old), _messages(new)
        self.found: list[tuple[str, str]] = []
        if old.package != new.package:
            self.found.append(("PACKAGE_CHANGED", "#/"))

    def run(self) -> list[tuple[str, str]]:
        for name, old_msg in self.old.items():
            path = "#/" + name.lstrip(".").split(".", 1)[-1] if "." in name.lstrip(".") else (
                "#/" + name.lstrip(".")
            )
            new_msg = self.new.get(name)
            if new_msg is None:
                self.found.append(("MESSAGE_REMOVED", path))
            elif not old_msg.options.map_entry:
                self._fields(old_msg, new_msg, path)
        return self.found

    def _fields(self, old: d.DescriptorProto, new: d.DescriptorProto, path: str) -> None:
        old_fields = {f.number: f for f in old.field}
        new_fields = {f.number: f for f in new.field}
        moved: dict[str, int] = {}
        for number, of in old_fields.items():
            nf = new_fields.get(number)
            at = f"{path}/{number}"
            if nf is None:
                if of.label == F.LABEL_REQUIRED:
                    self.found.append(("REQUIRED_FIELD_REMOVED", at))
                elif _oneof(old, of) is not None:
                    self.found.append(("ONEOF_FIELD_REMOVED", at))
                continue
            if _oneof(old, of) is None and _oneof(new, nf) is not None:
                moved[str(_oneof(new, nf))] = moved.get(str(_oneof(new, nf)), 0) + 1
            self._field(of, nf, at)
        for number, nf in new_fields.items():
            if number not in old_fields and nf.label == F.LABEL_REQUIRED:
                self.found.append(("REQUIRED_FIELD_ADDED", f"{path}/{number}"))
        old_oneofs = {o.name for o in old.oneof_decl}
        for oneof, count in moved.items():
            if count > 1:
                self.found.append(("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{oneof}"))
            elif oneof in old_oneofs:
                self.found.append(("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{oneof}"))

    def _field(self, old: d.FieldDescriptorProto, new: d.FieldDescriptorProto, at: str) -> None:
        old_kind, new_kind = _kind(old, self.old), _kind(new, self.new)
        if old_kind != new_kind:
            self.found.append(("FIELD_KIND_CHANGED", at))
        elif old_kind == "SCALAR":
            if GROUPS.get(old.type) != GROUPS.get(new.type):
                self.found.append(("FIELD_SCALAR_KIND_CHANGED", at))
            elif old.label != new.label and GROUPS.get(old.type) != "STRING_OR_BYTES":
                self.found.append(("FIELD_NUMERIC_LABEL_CHANGED", at))
        elif old_kind == "MESSAGE" and old.type_name != new.type_name:
            self.found.append(("FIELD_NAMED_TYPE_CHANGED", at))


def protobuf_differences(
    old: d.FileDescriptorProto, new: d.FileDescriptorProto, reader: str, writer: str
) -> list[str]:
    """Why data written with ``old`` cannot be read with ``new`` (Confluent's messages)."""
    out = []
    for kind, path in _Diff(old, new).run():
        text = DESCRIPTIONS[kind].format(path=path)
        text = text.replace("%s", reader, 1).replace("%s", writer, 1)
        out.append(f'{{errorType:"{kind}", description:"{text}"}}')
    return out
