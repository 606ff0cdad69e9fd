"""Protobuf schemas (schemaType PROTOBUF): parsing, the canonical text, the serialized form, and
compatibility.

A schema arrives as ``.proto`` text or, as confluent-kafka's ``ProtobufSerializer`` sends it, as a
base64 ``FileDescriptorProto``. Text is parsed by ``proto-schema-parser`` (pure Python, an
ANTLR grammar of Buf's) into an AST, which is turned here into a ``FileDescriptorProto``
(names resolved by protobuf's scoping rules, map fields as their ``...Entry`` messages, proto3
``optional`` as synthetic oneofs); either way the descriptor is then built by protobuf's own
``DescriptorPool`` (upb), which refuses what protoc would (duplicate field numbers, unknown
types, ...). Imports resolve to schema references (by their name, as Confluent's clients name
them) and to the well-known types ``google/protobuf/*.proto``, which need no reference.

The canonical text, stored and answered, is what Confluent's registry stores: its printer's
rendering (strom.schemas.protobuf_printer) of the file's elements (strom.schemas.protobuf_elements),
taken from the text as written or from the descriptor as Confluent reads one; ``normalize=true``
stores Confluent's normalized rendering (``ParsedProto.normalized``). ``ParsedProto.same`` tells
two spellings of one schema (a text and its descriptor) apart from two schemas: strom finds a
version of a subject by either spelling, where Confluent compares the texts.
``?format=serialized`` answers base64 of the descriptor, which is what confluent-kafka's
deserializers ask for. Compatibility is Confluent's Protobuf rules
(strom.schemas.protobuf_compatibility).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Iterable
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from proto_schema_parser import ast

from strom.schemas import (
    compatibility,
    protobuf_compatibility,
    protobuf_confluent,
    protobuf_elements,
    protobuf_printer,
)
from strom.schemas.protobuf_parser import LiteralParser
from strom.schemas.protobuf_text import option_signature, render

FDP = descriptor_pb2.FileDescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto
SCHEMA_FILE = "schema.proto"  # the name a registered file is given (clients rename it anyway)
MAX_FIELD_NUMBER = 536870911
SCALARS = {
    "double": FieldProto.TYPE_DOUBLE,
    "float": FieldProto.TYPE_FLOAT,
    "int64": FieldProto.TYPE_INT64,
    "uint64": FieldProto.TYPE_UINT64,
    "int32": FieldProto.TYPE_INT32,
    "fixed64": FieldProto.TYPE_FIXED64,
    "fixed32": FieldProto.TYPE_FIXED32,
    "bool": FieldProto.TYPE_BOOL,
    "string": FieldProto.TYPE_STRING,
    "bytes": FieldProto.TYPE_BYTES,
    "uint32": FieldProto.TYPE_UINT32,
    "sfixed32": FieldProto.TYPE_SFIXED32,
    "sfixed64": FieldProto.TYPE_SFIXED64,
    "sint32": FieldProto.TYPE_SINT32,
    "sint64": FieldProto.TYPE_SINT64,
}
_WELL_KNOWN_MODULES = (
    "any",
    "api",
    "descriptor",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
)
# google/protobuf/<name>.proto -> its descriptor, as the protobuf package ships it
WELL_KNOWN = {
    module.DESCRIPTOR.name: module.DESCRIPTOR
    for module in (importlib.import_module(f"google.protobuf.{name}_pb2") for name in _WELL_KNOWN_MODULES)
}


class InvalidSchemaError(ValueError):
    pass


class ParsedProto:
    """A parsed schema: its descriptor and the descriptors of the files it imports; ``identity``,
    the descriptor rendered (type names fully qualified, options left out), and ``options``, the
    options as written (None for a schema sent as a descriptor): two spellings of one schema have
    the same identity and options (see ``same``)."""

    def __init__(
        self,
        file: Any,
        dependencies: dict[str, Any],
        options: tuple | None = None,
        elements: protobuf_elements.File | None = None,
    ):
        self.file = file
        self.dependencies = dependencies
        self.identity = render(file)
        self.options = options
        self.elements = elements if elements is not None else protobuf_elements.from_descriptor(file, _meta_option)

    def text(self) -> str:
        """The text Confluent's registry stores for this schema."""
        return protobuf_printer.to_text(self.elements)

    def without_extensions(self) -> str:
        """``format=ignore_extensions``: the text without custom options (Confluent's own kept),
        extension ranges and ``extend`` blocks."""
        return protobuf_printer.to_text(self.elements, ignore_extensions=True)

    def normalized(self) -> str:
        """``normalize=true``'s text: Confluent's normalized rendering, type names resolved
        against the schema's own types and those of the files it imports."""
        files = [protobuf_elements.from_descriptor(dep) for dep in self.dependencies.values()]
        types = protobuf_printer.Types([*files, self.elements], self.elements.package)
        try:
            return protobuf_printer.to_text(self.elements, normalize=True, types=types)
        except ValueError as exc:
            raise InvalidSchemaError(f"Invalid schema: {exc}") from None

    def same(self, other: ParsedProto) -> bool:
        """The same schema spelled another way: type names written otherwise (``Line`` and
        ``.shop.Order.Line``), or one of them sent as a descriptor (whose options strom does not
        compare: confluent-kafka's serializers send descriptors)."""
        if self.identity != other.identity:
            return False
        return self.options is None or other.options is None or self.options == other.options

    def serialized(self) -> str:
        """Base64 of the descriptor: the answer to ``format=serialized``."""
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")


class _Raise(ErrorListener):
    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802 (ANTLR's name)
        raise InvalidSchemaError(f"Invalid schema: line {line}:{column}: {msg}")


def _quiet(recognizer: Any) -> None:
    recognizer.removeErrorListeners()  # ANTLR's default prints to stderr and carries on
    recognizer.addErrorListener(_Raise())


_PARSER = LiteralParser(setup_lexer=_quiet, setup_parser=_quiet)


_CONFLUENT: dict[str, Any] = {}  # confluent/*.proto -> its descriptor, parsed once


def _well_known(name: str) -> Any | None:
    """A file imported without a reference: protobuf's well-known types and Confluent's own."""
    proto = FDP()
    found = WELL_KNOWN.get(name)
    if found is not None:
        found.CopyToProto(proto)
        return proto
    if name not in protobuf_confluent.TEXTS:
        return None
    if name not in _CONFLUENT:
        parsed, _ = parse(protobuf_confluent.TEXTS[name])
        parsed.file.name = name
        _CONFLUENT[name] = parsed.file
    proto.CopyFrom(_CONFLUENT[name])
    return proto


_META_CLASS: list[Any] = []


def _meta_class() -> Any:
    """``confluent.Meta`` as a class whose ``params`` keep the order they were sent in (its map
    entries read as a repeated message)."""
    if not _META_CLASS:
        meta = FDP()
        meta.CopyFrom(_well_known(protobuf_confluent.META))
        for nested in meta.message_type[0].nested_type:
            nested.options.ClearField("map_entry")
        pool = DescriptorPool()
        pool.AddSerializedFile(WELL_KNOWN["google/protobuf/descriptor.proto"].serialized_pb)
        pool.Add(meta)
        _META_CLASS.append(GetMessageClass(pool.FindMessageTypeByName("confluent.Meta")))
    return _META_CLASS[0]


def _meta_option(options: Any) -> protobuf_elements.Option | None:
    return protobuf_confluent.meta_option(options, _meta_class)


def parse(text: str, referenced: Iterable[tuple[str, str]] = ()) -> tuple[ParsedProto, str]:
    """(the parsed schema, its canonical text), or InvalidSchemaError saying why.

    ``referenced`` are (import name, schema text) of the schemas it references, in order."""
    dependencies: dict[str, Any] = {}
    for name, other in referenced:
        parsed, _ = parse(other, [(n, t) for n, t in referenced if n != name])
        parsed.file.name = name
        dependencies[name] = parsed.file
    file, tree = _read(text, dependencies)
    if not file.message_type and not file.enum_type:
        raise InvalidSchemaError("Invalid schema: the schema defines no message and no enum")
    file.name = SCHEMA_FILE
    for name in file.dependency:
        if name not in dependencies:
            found = _well_known(name)
            if found is None:
                raise InvalidSchemaError(
                    f"Invalid schema: import {name!r} is neither a reference nor a well-known type"
                )
            dependencies[name] = found
    pool = DescriptorPool()
    try:
        added: set[str] = set()
        for name in file.dependency:
            _add(pool, dependencies[name], dependencies, added)
        pool.Add(file)
        pool.FindFileByName(SCHEMA_FILE)
    except InvalidSchemaError:
        raise
    except Exception as exc:  # upb's TypeError, a KeyError of a missing dependency
        raise InvalidSchemaError(f"Invalid schema: {exc}") from None
    if tree is None:
        parsed = ParsedProto(file, dependencies)
    else:
        try:
            elements = protobuf_elements.from_tree(tree)
        except ValueError as exc:
            raise InvalidSchemaError(f"Invalid schema: {exc}") from None
        parsed = ParsedProto(file, dependencies, option_signature(tree), elements)
    return parsed, parsed.text()


def _add(pool: DescriptorPool, file: Any, dependencies: dict[str, Any], added: set[str]) -> None:
    if file.name in added:
        return
    added.add(file.name)
    for name in file.dependency:
        found = dependencies.get(name) or _well_known(name)
        if found is None:
            raise InvalidSchemaError(f"Invalid schema: import {name!r} of {file.name} is not known")
        _add(pool, found, dependencies, added)
    pool.Add(file)


def _read(text: str, dependencies: dict[str, Any]) -> tuple[Any, ast.File | None]:
    """The descriptor of ``.proto`` text and its syntax tree, or of a base64 descriptor (no tree)
    when it is not text."""
    try:
        tree = _PARSER.parse(text)
    except InvalidSchemaError as exc:
        decoded = _from_base64(text)
        if decoded is None:
            raise exc from None
        return decoded, None
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    return _Builder(tree, dependencies).build(), tree


def _from_base64(text: str) -> Any | None:
    stripped = text.strip()
    if not stripped or not re.fullmatch(r"[A-Za-z0-9+/=\s]+", stripped):
        return None
    try:
        raw = base64.b64decode(stripped, validate=False)
        file = FDP()
        file.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not file.message_type and not file.enum_type:
        return None
    return file


def _camel(name: str) -> str:
    """protoc's name of a map field's entry message: ``my_map`` -> ``MyMapEntry``."""
    out, upper = [], True
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out) + "Entry"


def _ranges(texts: list[str], end_exclusive: bool) -> list[tuple[int, int]]:
    out = []
    for text in texts:
        low, _, high = (part.strip() for part in text.partition("to"))
        try:
            start = int(low, 0)
            end = (MAX_FIELD_NUMBER if high == "max" else int(high, 0)) if high else start
        except ValueError:
            raise InvalidSchemaError(f"Invalid schema: reserved range {text!r}") from None
        out.append((start, end + 1 if end_exclusive else end))
    return out


def _set_standard(options: Any, option: ast.Option) -> None:
    """Set a standard option (a field of ``FileOptions``, ``FieldOptions`` ...) as written, so the
    descriptor (``format=serialized``) carries it as protoc's would, and Confluent's own
    ``(confluent.*_meta)``; other custom ``(my.option)`` ones and values of another type are left
    out of the descriptor (the text keeps them), as Confluent's descriptor of a text leaves them."""
    field = options.DESCRIPTOR.fields_by_name.get(option.name)
    value = option.value
    meta = protobuf_confluent.META_OPTIONS.get(options.DESCRIPTOR.full_name)
    if meta is not None and option.name == f"({meta})" and isinstance(value, ast.MessageLiteral):
        literal = protobuf_elements.option(option.name, value).value  # Confluent's own, kept
        options.MergeFromString(protobuf_confluent.encode_meta(literal, _meta_class))
        return
    if field is None or field.is_repeated or field.message_type is not None:
        return
    if field.enum_type is not None:
        found = field.enum_type.values_by_name.get(value.name) if isinstance(value, ast.Identifier) else None
        if found is not None:
            setattr(options, option.name, found.number)
    elif field.type == field.TYPE_BOOL:
        if isinstance(value, bool):
            setattr(options, option.name, value)
    elif field.type == field.TYPE_STRING:
        if isinstance(value, str):
            setattr(options, option.name, protobuf_elements.unescape(value))


class _Builder:
    """AST -> FileDescriptorProto, with type names resolved to fully qualified ones."""

    def __init__(self, tree: ast.File, dependencies: dict[str, Any]):
        self.tree = tree
        self.package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
        self.symbols: dict[str, str] = {}  # ".pkg.Msg" -> "message" | "enum"
        for element in tree.file_elements:
            if isinstance(element, ast.Import):
                dep = dependencies.get(element.name) or _well_known(element.name)
                if dep is None:
                    raise InvalidSchemaError(
                        f"Invalid schema: import {element.name!r} is neither a reference nor a well-known type"
                    )
                self._collect_proto(dep.message_type, dep.enum_type, f".{dep.package}" if dep.package else "")
        self._collect_ast(tree.file_elements, f".{self.package}" if self.package else "")

    def _collect_proto(self, messages: Any, enums: Any, scope: str) -> None:
        for message in messages:
            self.symbols[f"{scope}.{message.name}"] = "message"
            self._collect_proto(message.nested_type, message.enum_type, f"{scope}.{message.name}")
        for enum in enums:
            self.symbols[f"{scope}.{enum.name}"] = "enum"

    def _collect_ast(self, elements: list, scope: str) -> None:
        for element in elements:
            if isinstance(element, ast.Message):
                self.symbols[f"{scope}.{element.name}"] = "message"
                self._collect_ast(element.elements, f"{scope}.{element.name}")
            elif isinstance(element, ast.Enum):
                self.symbols[f"{scope}.{element.name}"] = "enum"

    def resolve(self, name: str, scope: str) -> tuple[str, str]:
        if name.startswith("."):
            if name in self.symbols:
                return name, self.symbols[name]
            raise InvalidSchemaError(f"Invalid schema: type {name} is not defined")
        parts = [p for p in scope.split(".") if p]
        for end in range(len(parts), -1, -1):
            candidate = "." + ".".join([*parts[:end], name])
            if candidate in self.symbols:
                return candidate, self.symbols[candidate]
        raise InvalidSchemaError(f"Invalid schema: type {name} is not defined (in {scope or 'the file'})")

    def build(self) -> Any:
        tree = self.tree
        if tree.edition is not None:
            raise InvalidSchemaError("Invalid schema: protobuf editions are not supported; use proto2 or proto3")
        file = FDP(syntax=tree.syntax or "proto2")
        if self.package:
            file.package = self.package
        scope = f".{self.package}" if self.package else ""
        for element in tree.file_elements:
            if isinstance(element, ast.Import):
                if element.public:
                    file.public_dependency.append(len(file.dependency))
                file.dependency.append(element.name)
            elif isinstance(element, ast.Message):
                self._message(file.message_type.add(), element, scope, file.syntax)
            elif isinstance(element, ast.Enum):
                self._enum(file.enum_type.add(), element)
            elif isinstance(element, ast.Option):
                _set_standard(file.options, element)
            elif isinstance(element, ast.Extension):
                self._extend(file.extension, element, scope, file.syntax)
            elif isinstance(element, ast.Service):
                self._service(file.service.add(), element, scope)
        return file

    def _extend(self, out: Any, extend: ast.Extension, scope: str, syntax: str) -> None:
        """An ``extend`` block's fields, as protoc puts them in the descriptor (``extendee`` fully
        qualified): custom options are declared so, and normalizing resolves their names."""
        extendee, kind = self.resolve(extend.typeName, scope)
        if kind != "message":
            raise InvalidSchemaError(f"Invalid schema: extend {extend.typeName}: not a message")
        for element in extend.elements:
            if isinstance(element, ast.Field):
                field = out.add()
                self._field(field, element, scope, syntax, [])
                field.extendee = extendee
                field.ClearField("proto3_optional")
            elif isinstance(element, ast.Group):
                raise InvalidSchemaError("Invalid schema: groups are not supported")

    def _service(self, out: Any, service: ast.Service, scope: str) -> None:
        out.name = service.name
        for element in service.elements:
            if isinstance(element, ast.Option):
                _set_standard(out.options, element)
            elif isinstance(element, ast.Method):
                method = out.method.add(name=element.name)
                method.input_type = self.resolve(element.input_type.type, scope)[0]
                method.output_type = self.resolve(element.output_type.type, scope)[0]
                if element.input_type.stream:
                    method.client_streaming = True
                if element.output_type.stream:
                    method.server_streaming = True
                for option in element.elements:
                    if isinstance(option, ast.Option):
                        _set_standard(method.options, option)

    def _message(self, out: Any, message: ast.Message, scope: str, syntax: str) -> None:
        out.name = message.name
        here = f"{scope}.{message.name}"
        synthetic: list[tuple[Any, str]] = []
        for element in message.elements:
            if isinstance(element, ast.Field):
                self._field(out.field.add(), element, here, syntax, synthetic)
            elif isinstance(element, ast.MapField):
                self._map(out, element, here, syntax)
            elif isinstance(element, ast.OneOf):
                index = len(out.oneof_decl)
                out.oneof_decl.add(name=element.name)
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        field = out.field.add()
                        self._field(field, member, here, syntax, synthetic)
                        field.label = FieldProto.LABEL_OPTIONAL
                        field.oneof_index = index
                    elif isinstance(member, ast.Group):
                        raise InvalidSchemaError("Invalid schema: groups are not supported")
            elif isinstance(element, ast.Message):
                self._message(out.nested_type.add(), element, here, syntax)
            elif isinstance(element, ast.Enum):
                self._enum(out.enum_type.add(), element)
            elif isinstance(element, ast.Extension):
                self._extend(out.extension, element, here, syntax)
            elif isinstance(element, ast.ExtensionRange):
                for start, end in _ranges(element.ranges, end_exclusive=True):
                    out.extension_range.add(start=start, end=end)
            elif isinstance(element, ast.Reserved):
                for start, end in _ranges(element.ranges, end_exclusive=True):
                    out.reserved_range.add(start=start, end=end)
                out.reserved_name.extend(element.names)
            elif isinstance(element, ast.Group):
                raise InvalidSchemaError("Invalid schema: groups are not supported")
            elif isinstance(element, ast.Option):
                _set_standard(out.options, element)  # map_entry too: Confluent prints a descriptor's maps so
        for field, name in synthetic:  # protoc puts proto3 optional's oneofs after the real ones
            field.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=name)

    def _type(self, field: Any, type_name: str, scope: str) -> None:
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
            return
        if type_name == "group":
            raise InvalidSchemaError("Invalid schema: groups are not supported")
        full, kind = self.resolve(type_name, scope)
        field.type = FieldProto.TYPE_MESSAGE if kind == "message" else FieldProto.TYPE_ENUM
        field.type_name = full

    def _field(self, out: Any, field: ast.Field, scope: str, syntax: str, synthetic: list) -> None:
        out.name = field.name
        out.number = field.number
        self._type(out, field.type, scope)
        cardinality = field.cardinality.value if field.cardinality is not None else None
        if cardinality == "REPEATED":
            out.label = FieldProto.LABEL_REPEATED
        elif cardinality == "REQUIRED":
            out.label = FieldProto.LABEL_REQUIRED
        else:
            out.label = FieldProto.LABEL_OPTIONAL
            if cardinality == "OPTIONAL" and syntax == "proto3":
                out.proto3_optional = True
                synthetic.append((out, f"_{field.name}"))
        for option in field.options:
            if option.name == "default":
                value = option.value
                if isinstance(value, bool):
                    out.default_value = "true" if value else "false"
                elif isinstance(value, ast.Identifier):
                    out.default_value = value.name  # an enum value, inf or nan
                elif isinstance(value, str) and out.type == FieldProto.TYPE_STRING:
                    out.default_value = protobuf_elements.unescape(value)
                else:
                    out.default_value = str(value)
            elif option.name == "json_name":
                out.json_name = protobuf_elements.unescape(str(option.value))
            else:
                _set_standard(out.options, option)

    def _map(self, out: Any, field: ast.MapField, scope: str, syntax: str) -> None:
        entry = out.nested_type.add(name=_camel(field.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=FieldProto.LABEL_OPTIONAL)
        if field.key_type not in SCALARS or field.key_type in ("float", "double", "bytes"):
            raise InvalidSchemaError(f"Invalid schema: map key type {field.key_type} of {field.name}")
        key.type = SCALARS[field.key_type]
        value = entry.field.add(name="value", number=2, label=FieldProto.LABEL_OPTIONAL)
        self._type(value, field.value_type, scope)
        added = out.field.add(
            name=field.name,
            number=field.number,
            label=FieldProto.LABEL_REPEATED,
            type=FieldProto.TYPE_MESSAGE,
            type_name=f"{scope}.{entry.name}",
        )
        for option in field.options:
            _set_standard(added.options, option)

    @staticmethod
    def _enum(out: Any, enum: ast.Enum) -> None:
        out.name = enum.name
        for element in enum.elements:
            if isinstance(element, ast.EnumValue):
                value = out.value.add(name=element.name, number=element.number)
                for option in element.options:
                    _set_standard(value.options, option)
            elif isinstance(element, ast.Option):
                _set_standard(out.options, element)
            elif isinstance(element, ast.EnumReserved):
                for start, end in _ranges(element.ranges, end_exclusive=False):
                    out.reserved_range.add(start=start, end=end)
                out.reserved_name.extend(element.names)
        numbers = [value.number for value in out.value]
        if len(set(numbers)) < len(numbers) and not out.options.allow_alias:
            raise InvalidSchemaError(f"Invalid schema: enum {enum.name} reuses a number without allow_alias")


def compatibility_problems(level: str, new: ParsedProto, previous: list[ParsedProto]) -> list[str]:
    """The problems of registering ``new`` under ``level`` given the live versions ``previous``."""
    return compatibility.problems(level, new, previous, protobuf_compatibility.read_problems)


def syntax_tree(schema: str) -> ast.File | None:
    """The ``.proto`` text's syntax tree, or None when it does not parse."""
    try:
        return _PARSER.parse(schema)
    except (InvalidSchemaError, RecursionError):
        return None


def map_entry_name(field: str) -> str:
    """protoc's name of a map field's entry message: ``my_map`` -> ``MyMapEntry``."""
    return _camel(field)


def record_name(schema: str) -> str | None:
    """RecordNameStrategy's name of a Protobuf schema: its first message's full name."""
    tree = syntax_tree(schema)
    if tree is None:
        return None
    package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
    first = next((e.name for e in tree.file_elements if isinstance(e, ast.Message)), None)
    if first is None:
        return None
    return f"{package}.{first}" if package else first
