"""A Protobuf schema's *identity*: its descriptor rendered as ``.proto`` text, and the options of
its text; what ``strom.schemas.protobuf.ParsedProto.same`` compares to tell two spellings of one
schema (a text and its descriptor, type names written otherwise) from two schemas. The text the
registry stores is Confluent's printer's (strom.schemas.protobuf_printer); this rendering is never
stored.

The rendering: fields in number order (printers order them otherwise: Confluent's puts oneofs
after the other fields), real oneofs as blocks, type names fully qualified (``.shop.Order.Line``),
map fields as ``map<K, V>`` (their entry messages left out), proto3 ``optional`` as a label. Of the
options only ``default``, ``packed`` and ``allow_alias`` are rendered (the others are compared by
``option_signature``, for texts); services and extensions are not.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast

from strom.schemas.protobuf_elements import option
from strom.schemas.protobuf_printer import option_text

FieldProto = descriptor_pb2.FieldDescriptorProto


def scalar_name(kind: int) -> str:
    """``TYPE_INT32`` -> ``int32``."""
    return str(FieldProto.Type.Name(kind))[len("TYPE_") :].lower()


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render(file: Any) -> str:
    """The descriptor as ``.proto`` text: the canonical form the registry stores."""
    lines = [f"syntax = {_quote(file.syntax or 'proto2')};"]
    if file.package:
        lines.append(f"package {file.package};")
    public = set(file.public_dependency)
    for index, name in enumerate(file.dependency):
        lines.append(f"import {'public ' if index in public else ''}{_quote(name)};")
    for message in file.message_type:
        lines += _render_message(message, file.syntax or "proto2", "")
    for enum in file.enum_type:
        lines += _render_enum(enum, "")
    return "\n".join(lines) + "\n"


def _type_name(field: Any) -> str:
    if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_ENUM, FieldProto.TYPE_GROUP):
        return field.type_name
    return scalar_name(field.type)


def _render_field(field: Any, syntax: str, entries: dict[str, Any], in_oneof: bool) -> str:
    entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type == FieldProto.TYPE_MESSAGE else None
    if entry is not None and field.label == FieldProto.LABEL_REPEATED:
        key, value = sorted(entry.field, key=lambda f: f.number)[:2]
        kind = f"map<{_type_name(key)}, {_type_name(value)}>"
        label = ""
    else:
        kind = _type_name(field)
        if in_oneof:
            label = ""
        elif field.label == FieldProto.LABEL_REPEATED:
            label = "repeated "
        elif field.label == FieldProto.LABEL_REQUIRED:
            label = "required "
        elif syntax == "proto2" or field.proto3_optional:
            label = "optional "
        else:
            label = ""
    options = []
    if field.HasField("default_value"):
        text = field.default_value
        quoted = field.type in (FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES)
        options.append(f"default = {_quote(text) if quoted else text}")
    if field.options.HasField("packed"):
        options.append(f"packed = {'true' if field.options.packed else 'false'}")
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label}{kind} {field.name} = {field.number}{suffix};"


def _render_message(message: Any, syntax: str, indent: str) -> list[str]:
    inner = indent + "  "
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
    done: set[int] = set()
    fields = sorted(message.field, key=lambda f: f.number)  # printers order them otherwise
    for field in fields:
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            index = field.oneof_index
            if index in done:
                continue
            done.add(index)
            lines.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            for member in fields:
                if member.HasField("oneof_index") and member.oneof_index == index:
                    lines.append(f"{inner}  {_render_field(member, syntax, entries, True)}")
            lines.append(f"{inner}}}")
        else:
            lines.append(f"{inner}{_render_field(field, syntax, entries, False)}")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _render_message(nested, syntax, inner)
    for enum in message.enum_type:
        lines += _render_enum(enum, inner)
    for reserved in message.reserved_range:
        end = reserved.end - 1
        lines.append(f"{inner}reserved {reserved.start}{'' if end == reserved.start else f' to {end}'};")
    if message.reserved_name:
        lines.append(f"{inner}reserved {', '.join(_quote(n) for n in message.reserved_name)};")
    lines.append(f"{indent}}}")
    return lines


def _render_enum(enum: Any, indent: str) -> list[str]:
    inner = indent + "  "
    lines = [f"{indent}enum {enum.name} {{"]
    if enum.options.allow_alias:
        lines.append(f"{inner}option allow_alias = true;")
    lines += [f"{inner}{value.name} = {value.number};" for value in enum.value]
    for reserved in enum.reserved_range:
        lines.append(
            f"{inner}reserved {reserved.start}{'' if reserved.end == reserved.start else f' to {reserved.end}'};"
        )
    if enum.reserved_name:
        lines.append(f"{inner}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    lines.append(f"{indent}}}")
    return lines


def option_signature(tree: ast.File) -> tuple[tuple[str, str], ...]:
    """Every option of a schema (where it is, its name and value), sorted: what, beside the
    identity, tells two spellings of one schema from two schemas."""
    found: list[tuple[str, str]] = []

    def walk(elements: list, where: str) -> None:
        for element in elements:
            name = getattr(element, "name", "")
            if isinstance(element, ast.Option):
                found.append((where, option_text(option(element.name, element.value))))
                continue
            for written in getattr(element, "options", None) or []:
                found.append((f"{where}.{name}", option_text(option(written.name, written.value))))
            inner = getattr(element, "elements", None)
            if isinstance(inner, list):
                walk(inner, f"{where}.{name}")

    walk(tree.file_elements, "")
    return tuple(sorted(found))
