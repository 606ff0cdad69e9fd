"""Protobuf schemas printed as ``.proto`` text: the canonical forms the registry stores.

A schema sent as ``.proto`` text is stored as its syntax tree printed back (``print_tree``), as
Confluent's registry stores its printer's rendering of the parsed file
(``ProtobufSchema.canonicalString``): comments and layout are dropped, so the same schema written
with other whitespace or comments gets the same text and id, and everything else is kept as
written: type names (``Line``, not ``.shop.Order.Line``), declaration order (nested messages
between fields, which Confluent's message indexes count in), options of every kind
(``java_package``, ``go_package``, ``json_name``, custom ``(my.option)`` ones, on the file,
messages, fields, map fields, enums and their values), services and extensions. It is
``proto-schema-parser``'s own Generator, with comments taken out of the tree first and the
options it leaves out (enum values', map fields') or quotes wrongly (a file option's identifier
value, ``optimize_for = SPEED``) printed.

A schema sent as a descriptor (confluent-kafka's ``ProtobufSerializer`` sends base64 of a
``FileDescriptorProto``), and every schema's *identity* (``render``, what two texts are compared
by when they differ), is the descriptor rendered: declaration order of each kind kept; type names
written fully qualified (``.shop.Order.Line``), so the text means the same wherever it is read;
map fields written as ``map<K, V>`` (their entry messages left out), real oneofs as blocks, proto3
``optional`` as a label. Of the options only ``default``, ``packed`` and ``allow_alias`` are kept;
services and extensions are not rendered. Rendering a descriptor parsed from a rendering gives the
same text (a fixed point), and so does printing a tree parsed from a printed tree.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.generator import Generator

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
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            index = field.oneof_index
            if index in done:
                continue
            done.add(index)
            lines.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            for member in message.field:
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


def _without_comments(node: Any) -> Any:
    """A copy of a syntax tree (node) with its comments left out."""
    if isinstance(node, list):
        return [_without_comments(n) for n in node if not isinstance(n, ast.Comment)]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {
            f.name: _without_comments(getattr(node, f.name))
            for f in dataclasses.fields(node)
            if isinstance(getattr(node, f.name), list)
        }
        return dataclasses.replace(node, **changes) if changes else node
    return node


class _Printer(Generator):
    """proto-schema-parser's Generator, printing the options it leaves out or misquotes."""

    def generate(self, file: ast.File) -> str:
        lines = [f'syntax = "{file.syntax}";'] if file.syntax else []
        for element in file.file_elements:
            if isinstance(element, ast.Option):
                lines.append(self._generate_option(element, 0))
            else:
                lines.append(super().generate(ast.File(file_elements=[element])))
        return "\n".join(line for line in lines if line) + "\n"

    def _options(self, options: list, indent_level: int) -> str:
        if not options:
            return ""
        inner = ", ".join(
            f"{o.name} = {self._generate_option_value(o.value, indent_level, inline=True)}" for o in options
        )
        return f" [{inner}]"

    def _generate_map_field(self, map_field: ast.MapField, indent_level: int = 0) -> str:
        line = super()._generate_map_field(map_field, indent_level)
        return line[:-1] + self._options(map_field.options, indent_level) + ";"

    def _generate_enum(self, enum: ast.Enum, indent_level: int = 0) -> str:
        lines = [f"{'  ' * indent_level}enum {enum.name} {{"]
        for element in enum.elements:
            if isinstance(element, ast.EnumValue):
                options = self._options(element.options, indent_level + 1)
                lines.append(f"{'  ' * (indent_level + 1)}{element.name} = {element.number}{options};")
            else:
                printed = super()._generate_enum(ast.Enum(name="", elements=[element]), indent_level).split("\n")
                lines += printed[1:-1]  # the element's lines, without the wrapping enum's
        lines.append(f"{'  ' * indent_level}}}")
        return "\n".join(lines)


def print_tree(tree: ast.File) -> str:
    """A ``.proto`` syntax tree printed back without its comments: the canonical text of a schema
    sent as text."""
    return _Printer().generate(_without_comments(tree))


def option_signature(tree: ast.File) -> tuple[tuple[str, str], ...]:
    """Every option of a schema (where it is, its name and value), sorted: what, beside the
    identity, tells two spellings of one schema from two schemas."""
    printer = _Printer()
    found: list[tuple[str, str]] = []

    def walk(elements: list, where: str) -> None:
        for element in elements:
            name = getattr(element, "name", "")
            if isinstance(element, ast.Option):
                found.append((where, f"{element.name}={printer._generate_option_value(element.value, 0, True)}"))
                continue
            for option in getattr(element, "options", None) or []:
                found.append(
                    (f"{where}.{name}", f"{option.name}={printer._generate_option_value(option.value, 0, True)}")
                )
            inner = getattr(element, "elements", None)
            if isinstance(inner, list):
                walk(inner, f"{where}.{name}")

    walk(tree.file_elements, "")
    return tuple(sorted(found))
