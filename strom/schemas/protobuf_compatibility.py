"""Confluent's Protobuf compatibility rules, on descriptors (``read_problems(reader, writer)``).

The differences Confluent's registry calls incompatible (its diff-schema examples): PACKAGE_CHANGED,
MESSAGE_REMOVED, FIELD_KIND_CHANGED (scalar, message, enum; but an enum and the varint scalars
int32/uint32/int64/uint64/bool read each other), FIELD_SCALAR_KIND_CHANGED outside the
wire-compatible groups (int32/uint32/int64/uint64/bool, sint32/sint64, fixed32/sfixed32,
fixed64/sfixed64, string/bytes), FIELD_NAMED_TYPE_CHANGED (another message or enum, a map's key
or value type), FIELD_NUMERIC_LABEL_CHANGED (a number turned repeated or singular; string, bytes
and message fields may change), REQUIRED_FIELD_ADDED, REQUIRED_FIELD_REMOVED, ONEOF_FIELD_REMOVED,
FIELD_MOVED_TO_EXISTING_ONEOF (a oneof of the same name, or one holding fields that were in a
oneof) and MULTIPLE_FIELDS_MOVED_TO_ONEOF. Fields are matched by number (a renamed field is the
same field, a renumbered one a field removed and one added); messages by their name relative to
the package, wherever they are declared. Fields and messages added, fields removed and enum
changes are compatible. The rules are nearly symmetric, so FORWARD is the same check turned round.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

from strom.schemas.protobuf_text import scalar_name

FieldProto = descriptor_pb2.FieldDescriptorProto
_LENGTH_DELIMITED = (FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES, FieldProto.TYPE_MESSAGE)
_WIRE_GROUPS = [
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
]


def _messages(file: Any) -> dict[str, Any]:
    """Messages by their name relative to the package (``Outer.Inner``); map entries left out."""
    out: dict[str, Any] = {}

    def walk(messages: Any, prefix: str) -> None:
        for message in messages:
            if message.options.map_entry:
                continue
            name = f"{prefix}{message.name}"
            out[name] = message
            walk(message.nested_type, f"{name}.")

    walk(file.message_type, "")
    return out


def _kind(field: Any) -> str:
    if field.type == FieldProto.TYPE_MESSAGE:
        return "message"
    if field.type == FieldProto.TYPE_ENUM:
        return "enum"
    return "scalar"


def _relative(type_name: str, package: str) -> str:
    prefix = f".{package}." if package else "."
    return type_name[len(prefix) :] if type_name.startswith(prefix) else type_name.lstrip(".")


def read_problems(reader: Any, writer: Any) -> list[str]:
    """Why data written with ``writer`` may not be read with ``reader`` (each a parsed schema
    whose ``file`` is its descriptor); empty if none."""
    problems: list[str] = []
    r_file, w_file = reader.file, writer.file
    if r_file.package != w_file.package:
        problems.append(f"PACKAGE_CHANGED: {w_file.package!r} -> {r_file.package!r}")
    r_messages, w_messages = _messages(r_file), _messages(w_file)
    for name, w_message in w_messages.items():
        r_message = r_messages.get(name)
        if r_message is None:
            problems.append(f"#/{name}: MESSAGE_REMOVED")
            continue
        problems += _message_problems(name, r_message, w_message, r_file.package, w_file.package)
    return problems


def _message_problems(name: str, reader: Any, writer: Any, r_package: str, w_package: str) -> list[str]:
    problems: list[str] = []
    r_fields = {f.number: f for f in reader.field}
    w_fields = {f.number: f for f in writer.field}
    r_entries = {n.name: n for n in reader.nested_type if n.options.map_entry}
    w_entries = {n.name: n for n in writer.nested_type if n.options.map_entry}
    for number, w_field in w_fields.items():
        where = f"#/{name}/{number}"
        r_field = r_fields.get(number)
        if r_field is None:
            if w_field.label == FieldProto.LABEL_REQUIRED:
                problems.append(f"{where}: REQUIRED_FIELD_REMOVED")
            elif _in_oneof(w_field):
                problems.append(f"{where}: ONEOF_FIELD_REMOVED")
            continue
        r_kind, w_kind = _kind(r_field), _kind(w_field)
        if r_kind != w_kind and not (_varint(r_field) and _varint(w_field)):  # an enum is a varint
            problems.append(f"{where}: FIELD_KIND_CHANGED ({w_kind} -> {r_kind})")
            continue
        if r_kind != w_kind:
            pass  # an enum read as a varint scalar or the other way round
        elif r_kind == "scalar" and r_field.type != w_field.type:
            old, new = scalar_name(w_field.type), scalar_name(r_field.type)
            if not any(old in group and new in group for group in _WIRE_GROUPS):
                problems.append(f"{where}: FIELD_SCALAR_KIND_CHANGED ({old} -> {new})")
        elif r_kind != "scalar":
            r_entry = r_entries.get(r_field.type_name.rsplit(".", 1)[-1])
            w_entry = w_entries.get(w_field.type_name.rsplit(".", 1)[-1])
            if r_entry is not None and w_entry is not None:  # maps: key and value types
                old_map = [(f.type, _relative(f.type_name, w_package)) for f in w_entry.field]
                new_map = [(f.type, _relative(f.type_name, r_package)) for f in r_entry.field]
                if old_map != new_map:
                    problems.append(f"{where}: FIELD_NAMED_TYPE_CHANGED (map types)")
            elif _relative(r_field.type_name, r_package) != _relative(w_field.type_name, w_package):
                problems.append(
                    f"{where}: FIELD_NAMED_TYPE_CHANGED ({_relative(w_field.type_name, w_package)} -> "
                    f"{_relative(r_field.type_name, r_package)})"
                )
        r_repeated = r_field.label == FieldProto.LABEL_REPEATED
        if r_repeated != (w_field.label == FieldProto.LABEL_REPEATED) and r_field.type not in _LENGTH_DELIMITED:
            # singular and repeated read each other for string, bytes and messages (protobuf's
            # guide), not for numbers: repeated numbers are packed
            problems.append(f"{where}: FIELD_NUMERIC_LABEL_CHANGED")
    for number, r_field in r_fields.items():
        if number not in w_fields and r_field.label == FieldProto.LABEL_REQUIRED:
            problems.append(f"#/{name}/{number}: REQUIRED_FIELD_ADDED")
    problems += _oneof_problems(name, reader, writer, w_fields)
    return problems


def _in_oneof(field: Any) -> bool:
    """In a real oneof (proto3 ``optional``'s synthetic oneof is none)."""
    return field.HasField("oneof_index") and not field.proto3_optional


def _varint(field: Any) -> bool:
    return field.type == FieldProto.TYPE_ENUM or scalar_name(field.type) in _WIRE_GROUPS[0]


def _oneof_problems(name: str, reader: Any, writer: Any, w_fields: dict[int, Any]) -> list[str]:
    """Fields moved into a oneof: into one the writer had (by its name, or because it holds
    fields that were in a oneof of the writer), or several into a new one."""
    problems = []
    w_oneof_names = {o.name for o in writer.oneof_decl}
    members: dict[int, list[Any]] = {}
    for field in reader.field:
        if _in_oneof(field):
            members.setdefault(field.oneof_index, []).append(field)
    for index, fields in members.items():
        oneof = reader.oneof_decl[index].name
        old = [w_fields[f.number] for f in fields if f.number in w_fields]
        moved = [f.number for f in old if not _in_oneof(f)]
        if not moved:
            continue
        if oneof in w_oneof_names or any(_in_oneof(f) for f in old):
            problems.append(f"#/{name}/{oneof}: FIELD_MOVED_TO_EXISTING_ONEOF {moved}")
        elif len(moved) > 1:
            problems.append(f"#/{name}/{oneof}: MULTIPLE_FIELDS_MOVED_TO_ONEOF {moved}")
    return problems
