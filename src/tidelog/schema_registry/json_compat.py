"""JSON Schema compatibility by Confluent's rules (its JSON ``SchemaDiff``): walk the old
(``original``) and new (``update``) schemas side by side, name each difference as Confluent
does (``TYPE_NARROWED``, ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``, ...) and keep those
outside its strict set of compatible changes. Open content models (additional properties
allowed) accept removed properties; closed ones accept added optional ones. Local ``$ref``s
(``#/definitions/..``, ``#/$defs/..``) are followed."""

from __future__ import annotations

from typing import Any

COMPATIBLE = {
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED",
    "TYPE_EXTENDED", "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
    "MIN_LENGTH_REMOVED", "PATTERN_REMOVED", "MAXIMUM_INCREASED", "MAXIMUM_REMOVED",
    "MINIMUM_DECREASED", "MINIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
    "REQUIRED_ATTRIBUTE_REMOVED", "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED",
    "ADDITIONAL_PROPERTIES_EXTENDED", "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
}
# keyword -> the stem of its _ADDED/_REMOVED/_INCREASED/_DECREASED differences
LIMITS = {
    "maxLength": "MAX_LENGTH", "minLength": "MIN_LENGTH",
    "maximum": "MAXIMUM", "minimum": "MINIMUM",
    "exclusiveMaximum": "EXCLUSIVE_MAXIMUM",
    "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
    "maxProperties": "MAX_PROPERTIES", "minProperties": "MIN_PROPERTIES",
    "maxItems": "MAX_ITEMS", "minItems": "MIN_ITEMS",
}
KEYWORD = {"MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED",
           "MULTIPLE_OF_ADDED", "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED",
           "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED", "MIN_PROPERTIES_ADDED",
           "MAX_ITEMS_ADDED", "MIN_ITEMS_ADDED", "UNIQUE_ITEMS_ADDED",
           "ADDITIONAL_PROPERTIES_REMOVED", "ADDITIONAL_ITEMS_REMOVED"}
INCREASED = {"MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
             "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED"}
DECREASED = {"MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
             "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"}
NARROWED = {"ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED", "ADDITIONAL_PROPERTIES_NARROWED"}
CHANGED = {"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "ENUM_ARRAY_CHANGED"}


def describe(kind: str, path: str, reader: str, writer: str) -> str:
    """Confluent's JSON ``Difference`` wording, naming the reader and writer schemas."""
    if kind in KEYWORD:
        text = f"The keyword at path '{path}' in the %s schema is not present in the %s schema"
    elif kind in INCREASED:
        text = f"The value at path '{path}' in the %s schema is more than its value in the %s schema"
    elif kind in DECREASED:
        text = f"The value at path '{path}' in the %s schema is less than its value in the %s schema"
    elif kind in NARROWED:
        text = (f"An array or combined type at path '{path}' has fewer elements in the %s schema "
                "than the %s schema")
    elif kind in CHANGED:
        text = f"A type at path '{path}' is different between the %s schema and the %s schema"
    elif kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        text = ("The %s schema has an unopen content model and has a required property at path "
                f"'{path}' which is missing in the %s schema")
    elif kind == "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL":
        text = ("The %s has a closed content model and is missing a property or item present at "
                f"path '{path}' in the %s schema")
    elif kind.endswith("_ADDED_TO_OPEN_CONTENT_MODEL"):
        text = ("The %s schema has an open content model and has a property or item at path "
                f"'{path}' which is missing in the %s schema")
    else:
        text = f"The value at path '{path}' is different between the %s and %s schema"
    text = text.replace("%s", reader, 1).replace("%s", writer, 1)
    return f'{{errorType:"{kind}", description:"{text}\'}}'


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    if kind is None:
        return set()
    found = set(kind) if isinstance(kind, list) else {kind}
    return found | ({"integer"} if "number" in found else set())


class _Diff:
    def __init__(self, old_root: Any, new_root: Any) -> None:
        self.roots = (old_root, new_root)
        self.found: list[tuple[str, str]] = []
        self.seen: set[tuple[int, int]] = set()

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path))

    def deref(self, schema: Any, root: Any) -> Any:
        for _ in range(32):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
                break
            ref = schema["$ref"]
            if not ref.startswith("#"):
                break
            target = root
            for part in [p for p in ref[1:].split("/") if p]:
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target
        return schema

    def compare(self, old: Any, new: Any, path: str) -> None:
        old, new = self.deref(old, self.roots[0]), self.deref(new, self.roots[1])
        if (id(old), id(new)) in self.seen:
            return
        self.seen.add((id(old), id(new)))
        old = {} if old is True else ({"not": {}} if old is False else old)
        new = {} if new is True else ({"not": {}} if new is False else new)
        if not isinstance(old, dict) or not isinstance(new, dict):
            return
        old_types, new_types = _types(old), _types(new)
        if old_types != new_types:
            if not new_types or (old_types and old_types < new_types):
                self.add("TYPE_EXTENDED", path)
            elif not old_types or new_types < old_types:
                self.add("TYPE_NARROWED", path)
            else:
                self.add("TYPE_CHANGED", path)
                return
        self._limits(old, new, path)
        self._enum(old, new, path)
        self._combined(old, new, path)
        if "object" in old_types | new_types or "properties" in old or "properties" in new:
            self._object(old, new, path)
        if "items" in old or "items" in new:
            self._items(old, new, path)

    def _limits(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        for key, name in LIMITS.items():
            a, b = old.get(key), new.get(key)
            if a == b or isinstance(a, bool) or isinstance(b, bool):
                continue
            if a is None:
                self.add(f"{name}_ADDED", f"{path}/{key}")
            elif b is None:
                self.add(f"{name}_REMOVED", f"{path}/{key}")
            else:
                self.add(f"{name}_{'INCREASED' if b > a else 'DECREASED'}", f"{path}/{key}")
        if old.get("pattern") != new.get("pattern"):
            change = ("ADDED" if "pattern" not in old else
                      "REMOVED" if "pattern" not in new else "CHANGED")
            self.add(f"PATTERN_{change}", f"{path}/pattern")
        a, b = old.get("multipleOf"), new.get("multipleOf")
        if a != b:
            if a is None or b is None:
                self.add(f"MULTIPLE_OF_{'ADDED' if a is None else 'REMOVED'}", f"{path}/multipleOf")
            elif b % a == 0:
                self.add("MULTIPLE_OF_EXPANDED", f"{path}/multipleOf")
            else:
                self.add("MULTIPLE_OF_REDUCED" if a % b == 0 else "MULTIPLE_OF_CHANGED",
                         f"{path}/multipleOf")
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            added = bool(new.get("uniqueItems"))
            self.add(f"UNIQUE_ITEMS_{'ADDED' if added else 'REMOVED'}", f"{path}/uniqueItems")

    def _enum(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        if ("enum" not in old and "enum" not in new) or old.get("enum") == new.get("enum"):
            return
        a = [repr(v) for v in old.get("enum") or []]
        b = [repr(v) for v in new.get("enum") or []]
        if "enum" not in new or set(a) < set(b):
            self.add("ENUM_ARRAY_EXTENDED", f"{path}/enum")
        elif "enum" not in old or set(b) < set(a):
            self.add("ENUM_ARRAY_NARROWED", f"{path}/enum")
        elif set(a) != set(b):
            self.add("ENUM_ARRAY_CHANGED", f"{path}/enum")

    def _combined(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        for key, kind in (("oneOf", "SUM"), ("anyOf", "SUM"), ("allOf", "PRODUCT")):
            a, b = old.get(key), new.get(key)
            if a is None and b is None:
                continue
            if a is None or b is None:
                self.add("COMBINED_TYPE_CHANGED", f"{path}/{key}")
                continue
            if len(a) != len(b):
                more = len(b) > len(a)
                self.add(f"{kind}_TYPE_{'EXTENDED' if more else 'NARROWED'}", f"{path}/{key}")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                self.compare(x, y, f"{path}/{key}/{i}")

    def _object(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties") or {}, new.get("properties") or {}
        old_req, new_req = set(old.get("required") or []), set(new.get("required") or [])
        for key in old_props:
            if key in new_props and (key in old_req) != (key in new_req):
                if key in old_req:
                    kind = "REQUIRED_ATTRIBUTE_REMOVED"
                elif isinstance(new_props[key], dict) and "default" in new_props[key]:
                    kind = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                else:
                    kind = "REQUIRED_ATTRIBUTE_ADDED"
                self.add(kind, f"{path}/required/{key}")
        for key in sorted(set(old_props) | set(new_props)):
            at = f"{path}/properties/{key}"
            if key not in new_props:
                self._removed(new, old_props[key], at)
            elif key not in old_props:
                self._added(old, new_props[key], key in new_req, at)
            else:
                self.compare(old_props[key], new_props[key], at)
        a, b = old.get("additionalProperties", True), new.get("additionalProperties", True)
        if (a is not False) != (b is not False):
            kind = "ADDITIONAL_PROPERTIES_ADDED" if b is not False else "ADDITIONAL_PROPERTIES_REMOVED"
            self.add(kind, f"{path}/additionalProperties")
        elif a is True and isinstance(b, dict):
            self.add("ADDITIONAL_PROPERTIES_NARROWED", f"{path}/additionalProperties")
        elif isinstance(a, dict) and b is True:
            self.add("ADDITIONAL_PROPERTIES_EXTENDED", f"{path}/additionalProperties")
        elif isinstance(a, dict) and isinstance(b, dict):
            self.compare(a, b, f"{path}/additionalProperties")

    def _removed(self, new: dict[str, Any], old_prop: Any, at: str) -> None:
        extra = new.get("additionalProperties", True)
        if extra is True and not new.get("patternProperties"):
            self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", at)
        elif isinstance(extra, dict):
            before = len(self.found)
            self.compare(old_prop, extra, at)
            ok = all(k in COMPATIBLE for k, _ in self.found[before:])
            self.add(f"PROPERTY_REMOVED_{'IS' if ok else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
        elif old_prop is False:
            self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", at)
        else:
            self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", at)

    def _added(self, old: dict[str, Any], new_prop: Any, required: bool, at: str) -> None:
        default = isinstance(new_prop, dict) and "default" in new_prop
        if old.get("additionalProperties", True) is True and not old.get("patternProperties"):
            if new_prop is True or new_prop == {}:
                self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", at)
            elif required:
                self.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if default
                         else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", at)
            else:
                self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", at)
            return
        extra = old.get("additionalProperties")
        if isinstance(extra, dict):
            before = len(self.found)
            self.compare(extra, new_prop, at)
            ok = all(k in COMPATIBLE for k, _ in self.found[before:])
            self.add(f"PROPERTY_ADDED_{'IS' if ok else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", at)
        if required:
            self.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if default
                     else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", at)
        else:
            self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", at)

    def _items(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        a, b = old.get("items", {}), new.get("items", {})
        if isinstance(a, dict | bool) and isinstance(b, dict | bool):
            self.compare(a, b, f"{path}/items")


def json_differences(old: Any, new: Any, reader: str, writer: str) -> list[str]:
    """Why data valid under ``old`` may be refused by ``new`` (Confluent's messages)."""
    diff = _Diff(old, new)
    diff.compare(old, new, "#")
    found = [(kind, path) for kind, path in diff.found if kind not in COMPATIBLE]
    return [describe(kind, path, reader, writer) for kind, path in found]
