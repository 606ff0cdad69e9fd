"""A ``.proto`` file as the elements Confluent's registry prints it from (Square Wire's
``ProtoFileElement``: messages, fields, oneofs, enums, options, reserved ranges, extensions,
services), built from either form a schema arrives in:

- ``from_tree``: the syntax tree of ``.proto`` text (proto-schema-parser). Everything written is
  kept as written: type names, option values, map fields as ``map<K, V>``; ``default`` and
  ``json_name`` leave the option list (Wire keeps them apart and prints them last); weak imports
  are dropped, as Wire's printer drops them.
- ``from_descriptor``: a ``FileDescriptorProto`` (confluent-kafka's serializers send base64 of
  one). What Confluent's ``ProtobufSchema.toProtoFile`` keeps is kept, in its order: the standard
  options it names (file: java_package ... ruby_package; message: no_standard_descriptor_accessor,
  deprecated, map_entry; field: ctype, packed, jstype, deprecated, debug_redact, retention,
  targets; enum: allow_alias, deprecated; enum value: deprecated, debug_redact; service and
  method: deprecated, idempotency_level), ``json_name`` when set, ``default`` outside proto3,
  reserved ranges and names, extension ranges, extensions; type names as the descriptor has them
  (fully qualified, ``.shop.Order.Line``); map fields as their ``...Entry`` messages with
  ``option map_entry = true``. Of the custom options only Confluent's own ``confluent.*_meta``
  are kept (strom.schemas.protobuf_confluent reads them): Confluent parses a descriptor with an
  extension registry that knows only those, so others are unknown fields to it.

strom.schemas.protobuf_printer prints these elements as Confluent does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast

FieldProto = descriptor_pb2.FieldDescriptorProto
MAX_TAG = 536870911
INT_MAX = 2147483647


@dataclass
class Primitive:
    """A boolean, enum or number inside an aggregate option value (Wire's OptionPrimitive);
    strings there are plain ``str``."""

    kind: str  # BOOLEAN | ENUM | NUMBER
    value: str


@dataclass
class Option:
    """``name = value``; kind is STRING, BOOLEAN, NUMBER, ENUM (value: its text), MAP (a dict of
    key -> value), LIST (a list of values) or OPTION (value: the Option after ``(name).``)."""

    name: str
    kind: str
    value: Any
    parenthesized: bool = False


@dataclass
class Range:
    """An inclusive range of numbers ``start to end`` (Kotlin's IntRange)."""

    start: int
    end: int


@dataclass
class Field:
    label: str | None  # "optional" | "required" | "repeated" | None
    type: str
    name: str
    tag: int
    default: str | None = None
    json_name: str | None = None
    options: list[Option] = field(default_factory=list)


@dataclass
class OneOf:
    name: str
    fields: list[Field] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


@dataclass
class Reserved:
    values: list[Any]  # int | Range | str


@dataclass
class Extensions:
    values: list[Any]  # int | Range
    options: list[Option] = field(default_factory=list)


@dataclass
class Extend:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class EnumConstant:
    name: str
    tag: int
    options: list[Option] = field(default_factory=list)


@dataclass
class Enum:
    name: str
    options: list[Option] = field(default_factory=list)
    constants: list[EnumConstant] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)


@dataclass
class Message:
    name: str
    options: list[Option] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)
    oneofs: list[OneOf] = field(default_factory=list)
    extensions: list[Extensions] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    nested: list[Any] = field(default_factory=list)  # Message | Enum, in declaration order

    def is_map_entry(self) -> bool:
        return any(o.name == "map_entry" and not o.parenthesized and str(o.value) == "true" for o in self.options)


@dataclass
class Rpc:
    name: str
    request: str
    response: str
    request_streaming: bool = False
    response_streaming: bool = False
    options: list[Option] = field(default_factory=list)


@dataclass
class Service:
    name: str
    options: list[Option] = field(default_factory=list)
    rpcs: list[Rpc] = field(default_factory=list)


@dataclass
class File:
    syntax: str | None = None
    package: str | None = None
    imports: list[str] = field(default_factory=list)
    public_imports: list[str] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    types: list[Any] = field(default_factory=list)  # Message | Enum
    extends: list[Extend] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)


# ---------------------------------------------------------------- from .proto text

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def unescape(text: str) -> str:
    """A string literal's value: proto-schema-parser keeps the escapes as written."""

    def one(match: re.Match) -> str:
        body = match.group(1)
        if body[0] in _ESCAPES:
            return _ESCAPES[body[0]]
        if body[0] in "xX":
            return chr(int(body[1:], 16))
        if body[0].isdigit():
            return chr(int(body, 8))
        if body[0] in "uU":
            return chr(int(body[1:], 16))
        return body

    return re.sub(r"\\([xX][0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", one, text)


def _number_text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _value(value: Any) -> tuple[str, Any]:
    """(kind, value) of an option value of the syntax tree."""
    if isinstance(value, bool):
        return "BOOLEAN", "true" if value else "false"
    if isinstance(value, (int, float)):
        return "NUMBER", getattr(value, "literal", None) or _number_text(value)  # as written
    if isinstance(value, ast.Identifier):
        return "ENUM", value.name
    if isinstance(value, ast.MessageLiteral):
        return "MAP", _literal(value)
    if isinstance(value, list):
        return "LIST", [_inner(v) for v in value]
    return "STRING", unescape(str(value))


def _inner(value: Any) -> Any:
    """A value inside an aggregate: strings plain, maps dicts, lists lists, others Primitive."""
    kind, converted = _value(value)
    if kind in ("BOOLEAN", "ENUM", "NUMBER"):
        return Primitive(kind, converted)
    return converted


def _literal(literal: ast.MessageLiteral) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for element in literal.elements:
        if not isinstance(element, ast.MessageLiteralField):
            continue
        value = _inner(element.value)
        if element.name in out:  # a repeated key: Wire collects the values into a list
            previous = out[element.name]
            out[element.name] = [*(previous if isinstance(previous, list) else [previous]), value]
        else:
            out[element.name] = value
    return out


def option(name: str, value: Any) -> Option:
    """An option of the syntax tree: ``(my.opt).sub.field = 1`` is Wire's OPTION kind, one level
    per name after the parenthesized one."""
    kind, converted = _value(value)
    if not name.startswith("("):
        return Option(name, kind, converted, False)
    close = name.find(")")
    inner, rest = name[1:close], name[close + 1 :]
    made: Any = converted
    for sub in reversed(rest[1:].split(".") if rest.startswith(".") else []):
        made, kind = Option(sub, kind, made), "OPTION"
    return Option(inner, kind, made, True)


def _options(options: list) -> list[Option]:
    return [option(o.name, o.value) for o in options]


_LABELS = {"REPEATED": "repeated", "REQUIRED": "required", "OPTIONAL": "optional"}


def _field(element: ast.Field) -> Field:
    out = Field(
        label=_LABELS.get(element.cardinality.value) if element.cardinality is not None else None,
        type=element.type,
        name=element.name,
        tag=element.number,
    )
    for written in element.options:
        if written.name == "default" and out.default is None:
            kind, value = _value(written.value)
            out.default = value
        elif written.name == "json_name" and out.json_name is None:
            out.json_name = unescape(str(written.value))
        else:
            out.options.append(option(written.name, written.value))
    return out


def _range_values(ranges: list[str], names: list[str]) -> list[Any]:
    values: list[Any] = []
    for text in ranges:
        low, _, high = (part.strip() for part in text.partition("to"))
        start = int(low, 0)
        if not high:
            values.append(start)
        else:
            values.append(Range(start, INT_MAX if high == "max" else int(high, 0)))
    values.extend(names)
    return values


def _message(element: ast.Message) -> Message:
    out = Message(element.name)
    for item in element.elements:
        if isinstance(item, ast.Field):
            out.fields.append(_field(item))
        elif isinstance(item, ast.MapField):
            mapped = _field(ast.Field(name=item.name, number=item.number, type="", options=item.options))
            mapped.type = f"map<{item.key_type}, {item.value_type}>"
            out.fields.append(mapped)
        elif isinstance(item, ast.OneOf):
            oneof = OneOf(item.name)
            for member in item.elements:
                if isinstance(member, ast.Field):
                    oneof.fields.append(_field(member))
                    oneof.fields[-1].label = None
                elif isinstance(member, ast.Option):
                    oneof.options.append(option(member.name, member.value))
            out.oneofs.append(oneof)
        elif isinstance(item, ast.Option):
            out.options.append(option(item.name, item.value))
        elif isinstance(item, ast.Reserved):
            out.reserveds.append(Reserved(_range_values(item.ranges, item.names)))
        elif isinstance(item, ast.ExtensionRange):
            out.extensions.append(Extensions(_range_values(item.ranges, []), _options(item.options)))
        elif isinstance(item, ast.Extension):
            out.extends.append(_extend(item))
        elif isinstance(item, ast.Message):
            out.nested.append(_message(item))
        elif isinstance(item, ast.Enum):
            out.nested.append(_enum(item))
    return out


def _extend(element: ast.Extension) -> Extend:
    return Extend(element.typeName, [_field(f) for f in element.elements if isinstance(f, ast.Field)])


def _enum(element: ast.Enum) -> Enum:
    out = Enum(element.name)
    for item in element.elements:
        if isinstance(item, ast.EnumValue):
            out.constants.append(EnumConstant(item.name, item.number, _options(item.options)))
        elif isinstance(item, ast.Option):
            out.options.append(option(item.name, item.value))
        elif isinstance(item, ast.EnumReserved):
            out.reserveds.append(Reserved(_range_values(item.ranges, item.names)))
    return out


def _service(element: ast.Service) -> Service:
    out = Service(element.name)
    for item in element.elements:
        if isinstance(item, ast.Option):
            out.options.append(option(item.name, item.value))
        elif isinstance(item, ast.Method):
            rpc_options = [option(o.name, o.value) for o in item.elements if isinstance(o, ast.Option)]
            out.rpcs.append(
                Rpc(
                    item.name,
                    item.input_type.type,
                    item.output_type.type,
                    item.input_type.stream,
                    item.output_type.stream,
                    rpc_options,
                )
            )
    return out


def from_tree(tree: ast.File) -> File:
    """The elements of ``.proto`` text, as Wire's parser makes them."""
    out = File(syntax=tree.syntax)
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            out.package = element.name
        elif isinstance(element, ast.Import):
            if element.public:
                out.public_imports.append(element.name)
            elif not element.weak:
                out.imports.append(element.name)
        elif isinstance(element, ast.Option):
            out.options.append(option(element.name, element.value))
        elif isinstance(element, ast.Message):
            out.types.append(_message(element))
        elif isinstance(element, ast.Enum):
            out.types.append(_enum(element))
        elif isinstance(element, ast.Extension):
            out.extends.append(_extend(element))
        elif isinstance(element, ast.Service):
            out.services.append(_service(element))
    return out


# ---------------------------------------------------------------- from a descriptor

# (option field, kind) in the order Confluent's toProtoFile adds them
_FILE_OPTIONS = (
    ("java_package", "STRING"),
    ("java_outer_classname", "STRING"),
    ("java_multiple_files", "BOOLEAN"),
    ("java_generate_equals_and_hash", "BOOLEAN"),
    ("java_string_check_utf8", "BOOLEAN"),
    ("optimize_for", "ENUM"),
    ("go_package", "STRING"),
    ("cc_generic_services", "BOOLEAN"),
    ("java_generic_services", "BOOLEAN"),
    ("py_generic_services", "BOOLEAN"),
    ("deprecated", "BOOLEAN"),
    ("cc_enable_arenas", "BOOLEAN"),
    ("objc_class_prefix", "STRING"),
    ("csharp_namespace", "STRING"),
    ("swift_prefix", "STRING"),
    ("php_class_prefix", "STRING"),
    ("php_namespace", "STRING"),
    ("php_metadata_namespace", "STRING"),
    ("ruby_package", "STRING"),
)
_MESSAGE_OPTIONS = (("no_standard_descriptor_accessor", "BOOLEAN"), ("deprecated", "BOOLEAN"), ("map_entry", "BOOLEAN"))
_FIELD_OPTIONS = (
    ("ctype", "ENUM"),
    ("packed", "BOOLEAN"),
    ("jstype", "ENUM"),
    ("deprecated", "BOOLEAN"),
    ("debug_redact", "BOOLEAN"),
    ("retention", "ENUM"),
)
_ENUM_OPTIONS = (("allow_alias", "BOOLEAN"), ("deprecated", "BOOLEAN"))
_ENUM_VALUE_OPTIONS = (("deprecated", "BOOLEAN"), ("debug_redact", "BOOLEAN"))
_SERVICE_OPTIONS = (("deprecated", "BOOLEAN"),)
_METHOD_OPTIONS = (("deprecated", "BOOLEAN"), ("idempotency_level", "ENUM"))


Meta = Callable[[Any], "Option | None"]  # a descriptor's options -> its confluent.*_meta option


def _standard(options: Any, names: tuple[tuple[str, str], ...], meta: Meta | None = None) -> list[Option]:
    """The options Confluent names, in its order, then its own ``confluent.*_meta`` one."""
    out = []
    for name, kind in names:
        if not options.HasField(name):
            continue
        value = getattr(options, name)
        if kind == "BOOLEAN":
            text = "true" if value else "false"
        elif kind == "ENUM":
            text = options.DESCRIPTOR.fields_by_name[name].enum_type.values_by_number[value].name
        else:
            text = value
        out.append(Option(name, kind, text))
    found = meta(options) if meta is not None else None
    if found is not None:
        out.append(found)
    return out


def _scalar(kind: int) -> str:
    return str(FieldProto.Type.Name(kind))[len("TYPE_") :].lower()


def _label(proto: Any, syntax: str) -> str | None:
    if proto.proto3_optional:
        return "optional"
    proto3 = syntax == "proto3"
    if proto.label == FieldProto.LABEL_REPEATED:
        return "repeated"
    if proto.label == FieldProto.LABEL_REQUIRED:
        return None if proto3 else "required"
    return None if proto3 else "optional"


def _descriptor_field(proto: Any, syntax: str, in_oneof: bool, meta: Meta | None) -> Field:
    options = _standard(proto.options, _FIELD_OPTIONS)
    field_options = proto.options
    fields_by_name = field_options.DESCRIPTOR.fields_by_name
    for target in field_options.targets:
        options.append(Option("targets", "ENUM", fields_by_name["targets"].enum_type.values_by_number[target].name))
    found = meta(field_options) if meta is not None else None
    if found is not None:
        options.append(found)
    return Field(
        label=None if in_oneof else _label(proto, syntax),
        type=proto.type_name if proto.HasField("type_name") else _scalar(proto.type),
        name=proto.name,
        tag=proto.number,
        default=proto.default_value if syntax != "proto3" and proto.HasField("default_value") else None,
        json_name=proto.json_name if proto.HasField("json_name") else None,
        options=options,
    )


def _extends(fields: Any, syntax: str, meta: Meta | None) -> list[Extend]:
    grouped: dict[str, Extend] = {}
    for proto in fields:
        grouped.setdefault(proto.extendee, Extend(proto.extendee)).fields.append(
            _descriptor_field(proto, syntax, False, meta)
        )
    return list(grouped.values())


def _exclusive(ranges: Any) -> list[Reserved]:
    return [Reserved([r.start if r.start == r.end - 1 else Range(r.start, r.end - 1)]) for r in ranges]


def _descriptor_message(proto: Any, syntax: str, meta: Meta | None) -> Message:
    out = Message(proto.name, options=_standard(proto.options, _MESSAGE_OPTIONS, meta))
    oneofs = [OneOf(o.name) for o in proto.oneof_decl]
    for member in proto.field:
        if member.HasField("oneof_index") and not member.proto3_optional:
            oneofs[member.oneof_index].fields.append(_descriptor_field(member, syntax, True, meta))
        else:
            out.fields.append(_descriptor_field(member, syntax, False, meta))
    out.oneofs = [o for o in oneofs if o.fields]
    out.nested = [_descriptor_message(m, syntax, meta) for m in proto.nested_type]
    out.nested += [_descriptor_enum(e, meta) for e in proto.enum_type]
    out.reserveds = _exclusive(proto.reserved_range) + [Reserved([name]) for name in proto.reserved_name]
    out.extensions = [Extensions(r.values) for r in _exclusive(proto.extension_range)]
    out.extends = _extends(proto.extension, syntax, meta)
    return out


def _descriptor_enum(proto: Any, meta: Meta | None) -> Enum:
    out = Enum(proto.name, options=_standard(proto.options, _ENUM_OPTIONS, meta))
    out.constants = [
        EnumConstant(v.name, v.number, _standard(v.options, _ENUM_VALUE_OPTIONS, meta)) for v in proto.value
    ]
    out.reserveds = [Reserved([r.start if r.start == r.end else Range(r.start, r.end)]) for r in proto.reserved_range]
    out.reserveds += [Reserved([name]) for name in proto.reserved_name]
    return out


def _descriptor_service(proto: Any) -> Service:
    out = Service(proto.name, options=_standard(proto.options, _SERVICE_OPTIONS))
    for method in proto.method:
        out.rpcs.append(
            Rpc(
                method.name,
                method.input_type,
                method.output_type,
                method.client_streaming,
                method.server_streaming,
                _standard(method.options, _METHOD_OPTIONS),
            )
        )
    return out


def from_descriptor(proto: Any, meta: Meta | None = None) -> File:
    """The elements of a ``FileDescriptorProto``, as Confluent's ``toProtoFile`` makes them;
    ``meta`` reads Confluent's own ``confluent.*_meta`` option out of an options message."""
    syntax = proto.syntax if proto.syntax in ("proto2", "proto3") else None
    out = File(syntax=syntax, package=proto.package or None)
    public = set(proto.public_dependency)
    weak = set(proto.weak_dependency)
    for index, name in enumerate(proto.dependency):
        if index in public:
            out.public_imports.append(name)
        elif index not in weak:
            out.imports.append(name)
    out.options = _standard(proto.options, _FILE_OPTIONS, meta)
    syntax_rules = proto.syntax or "proto2"
    out.types = [_descriptor_message(m, syntax_rules, meta) for m in proto.message_type]
    out.types += [_descriptor_enum(e, meta) for e in proto.enum_type]
    out.services = [_descriptor_service(s) for s in proto.service]
    out.extends = _extends(proto.extension, syntax_rules, meta)
    return out
