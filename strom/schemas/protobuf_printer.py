"""Confluent's Protobuf printer: the text its registry stores for a schema, and its
``normalize=true`` form (``ProtobufSchemaUtils.toString`` and ``toNormalizedString``), over the
elements of strom.schemas.protobuf_elements.

The layout is Confluent's, byte for byte: ``syntax``, ``package``, then a blank line before the
imports, the file options, the types (every message, then every enum), the extensions and the
services; inside a message its reserved ranges, options, fields, oneofs, extension ranges,
extensions and nested types, each group after a blank line (indented blank lines keep their two
spaces, as Confluent's ``appendIndented`` writes them); a field's options after ``[``, one per
line when there are several, ``default`` and ``json_name`` last.

Normalizing (``normalize=True``) also does what Confluent's does: ``syntax`` printed only for
proto3; imports sorted; type names resolved to fully qualified ones (``.shop.Order.Line``) by
protobuf's scoping rules, a map's entry message printed as ``map<K, V>`` and left out; fields and
oneofs sorted by number, enum values by number then name, reserved and extension ranges split
one per statement and sorted; options sorted by name, a custom option's name resolved to its
extension's full name and repeated settings of a non-repeated one merged; aggregate option values
with keys sorted and one-element lists unwrapped; numbers as Java's ``DecimalFormat`` prints them.
"""

from __future__ import annotations

import re
import struct
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any

from strom.schemas.protobuf_elements import (
    MAX_TAG,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    File,
    Message,
    OneOf,
    Option,
    Primitive,
    Range,
    Reserved,
    Rpc,
    Service,
)

SCALARS = frozenset(
    "bool bytes double float fixed32 fixed64 int32 int64 sfixed32 sfixed64 sint32 sint64 string uint32 uint64".split()
)
_NUMBER_KINDS = SCALARS - {"bool", "string"}


class Types:
    """What normalizing resolves names against: the types and extension fields of the schema and
    of the files it imports, by full name (no leading dot); Confluent's ``Context``."""

    def __init__(self, files: list[File], package: str | None):
        self.types: dict[str, Any] = {}
        self.extensions: dict[str, Field] = {}
        self.package = package or ""
        self.path: list[str] = []
        for file in files:
            prefix = [file.package] if file.package else []
            self._collect_extends(file.extends, prefix)
            self._collect(file.types, prefix)

    def _collect(self, types: list, prefix: list[str]) -> None:
        for element in types:
            here = [*prefix, element.name]
            self.types[".".join(here)] = element
            if isinstance(element, Message):
                self._collect_extends(element.extends, here)
                self._collect(element.nested, here)

    def _collect_extends(self, extends: list[Extend], prefix: list[str]) -> None:
        for extend in extends:
            for member in extend.fields:
                self.extensions[".".join([*prefix, member.name])] = member

    def resolve(self, name: str, table: dict[str, Any]) -> str | None:
        """The full name (no leading dot) ``name`` means where it is written, or None."""
        if name.startswith("."):
            return name[1:] if name[1:] in table else None
        prefix = [p for p in self.package.split(".") if p] + self.path
        while prefix:
            candidate = ".".join(prefix) + "." + name
            if candidate in table:
                return candidate
            prefix.pop()
        return name if name in table else None

    def resolve_type(self, name: str) -> str:
        found = self.resolve(name, self.types)
        if found is None:
            raise ValueError(f"Could not resolve type: {name}")
        return "." + found


class _Printer:
    def __init__(self, normalize: bool, types: Types | None, ignore_extensions: bool = False):
        self.normalize = normalize
        self.types = types if types is not None else Types([], None)
        self.ignore_extensions = ignore_extensions  # format=ignore_extensions

    # -- the file and its parts

    def file(self, file: File) -> str:
        out = []
        if file.syntax is not None and (not self.normalize or file.syntax == "proto3"):
            out.append(f'syntax = "{file.syntax}";\n')
        if file.package is not None:
            out.append(f"package {file.package};\n")
        if file.imports or file.public_imports:
            out.append("\n")
            imports, public = file.imports, file.public_imports
            if self.normalize:
                imports, public = sorted(set(imports)), sorted(set(public))
            out += [f'import "{name}";\n' for name in imports]
            out += [f'import public "{name}";\n' for name in public]
        options = self.filter_options(file.options)
        if options:
            out.append("\n")
            out += [self.option_statement(o) for o in options]
        types = self.filter_types(file.types)
        if types:
            out.append("\n")
            out += [self.scoped(t) for t in types if isinstance(t, Message)]
            out += [self.scoped(t) for t in types if isinstance(t, Enum)]
        if file.extends and not self.ignore_extensions:
            out.append("\n")
            out += [self.extend(e) for e in self.group_extends(file.extends)]
        if file.services:
            out.append("\n")
            out += [self.service(s) for s in file.services]
        return "".join(out)

    def scoped(self, element: Message | Enum) -> str:
        self.types.path.append(element.name)
        try:
            return self.message(element) if isinstance(element, Message) else self.enum(element)
        finally:
            self.types.path.pop()

    def filter_types(self, types: list) -> list:
        if not self.normalize:
            return types
        return [t for t in types if not (isinstance(t, Message) and t.is_map_entry())]

    def group_extends(self, extends: list[Extend]) -> list[Extend]:
        if not self.normalize:
            return extends
        grouped: dict[str, Extend] = {}
        for extend in extends:
            name = self.types.resolve_type(extend.name)
            grouped.setdefault(name, Extend(name)).fields.extend(extend.fields)
        return list(grouped.values())

    def message(self, message: Message) -> str:
        out = [f"message {message.name} {{"]
        out.append(self.section(self.sorted_ranges(message.reserveds), self.reserved))
        out.append(self.options_section(message.options))
        fields = sorted(message.fields, key=lambda f: f.tag) if self.normalize else message.fields
        out.append(self.section(fields, self.field))
        oneofs = message.oneofs
        if self.normalize:
            oneofs = [OneOf(o.name, sorted(o.fields, key=lambda f: f.tag), o.options) for o in oneofs if o.fields]
            oneofs.sort(key=lambda o: o.fields[0].tag)
        out.append(self.section(oneofs, self.oneof))
        if not self.ignore_extensions:
            out.append(self.section(self.sorted_extensions(message.extensions), self.extensions))
            out.append(self.section(self.group_extends(message.extends), self.extend))
        types = self.filter_types(message.nested)
        if types:
            out.append("\n")
            out += [_indented(self.scoped(t)) for t in types if isinstance(t, Message)]
            out += [_indented(self.scoped(t)) for t in types if isinstance(t, Enum)]
        out.append("}\n")
        return "".join(out)

    def enum(self, enum: Enum) -> str:
        out = [f"enum {enum.name} {{"]
        if enum.reserveds:
            out.append("\n")
            out += [_indented(self.reserved(r)) for r in self.sorted_ranges(enum.reserveds)]
        elif enum.options or enum.constants:
            out.append("\n")
        out += [_indented(self.option_statement(o)) for o in self.filter_options(enum.options)]
        constants = enum.constants
        if self.normalize:
            constants = sorted(constants, key=lambda c: (c.tag, c.name))
        out += [_indented(self.constant(c)) for c in constants]
        out.append("}\n")
        return "".join(out)

    def constant(self, constant: EnumConstant) -> str:
        options = self.filter_options(constant.options)
        suffix = " " + self.option_list(options) if options else ""
        return f"{constant.name} = {constant.tag}{suffix};\n"

    @staticmethod
    def section(items: list, render: Any) -> str:
        """A group of a block's lines: after a blank line (the block's ``{`` ends the first),
        each item indented; nothing when there are none."""
        return "\n" + "".join(_indented(render(item)) for item in items) if items else ""

    def options_section(self, options: list[Option]) -> str:
        return self.section(self.filter_options(options), self.option_statement)

    def oneof(self, oneof: OneOf) -> str:
        body = self.options_section(oneof.options) + self.section(oneof.fields, self.field)
        return f"oneof {oneof.name} {{{body}}}\n"

    def extend(self, extend: Extend) -> str:
        fields = sorted(extend.fields, key=lambda f: f.tag) if self.normalize else extend.fields
        return f"extend {extend.name} {{{self.section(fields, self.field)}}}\n"

    def service(self, service: Service) -> str:
        body = self.options_section(service.options) + self.section(service.rpcs, self.rpc)
        return f"service {service.name} {{{body}}}\n"

    def rpc(self, rpc: Rpc) -> str:
        request, response = rpc.request, rpc.response
        if self.normalize:
            request, response = self.types.resolve_type(request), self.types.resolve_type(response)
        out = [
            f"rpc {rpc.name} ({'stream ' if rpc.request_streaming else ''}{request}) returns "
            f"({'stream ' if rpc.response_streaming else ''}{response})"
        ]
        options = self.filter_options(rpc.options)
        if options:
            out.append(" {\n")
            out += [_indented(self.option_statement(o)) for o in options]
            out.append("}")
        out.append(";\n")
        return "".join(out)

    # -- ranges

    def sorted_ranges(self, reserveds: list[Reserved]) -> list[Reserved]:
        if not self.normalize:
            return reserveds
        split = [Reserved([value]) for r in reserveds for value in r.values]
        return sorted(split, key=lambda r: (_start(r.values[0]), str(r.values[0])))

    def sorted_extensions(self, extensions: list[Extensions]) -> list[Extensions]:
        if not self.normalize:
            return extensions
        split = [Extensions([value], e.options) for e in extensions for value in e.values]
        return sorted(split, key=lambda e: _start(e.values[0]))

    def range_text(self, value: Any) -> str:
        if isinstance(value, str):
            return f'"{value}"'
        if isinstance(value, int):
            return str(value)
        if self.normalize and value.start == value.end:
            return str(value.start)
        return f"{value.start} to {value.end if value.end < MAX_TAG else 'max'}"

    def reserved(self, reserved: Reserved) -> str:
        return f"reserved {', '.join(self.range_text(v) for v in reserved.values)};\n"

    def extensions(self, extensions: Extensions) -> str:
        options = self.filter_options(extensions.options)
        suffix = " " + self.option_list(options) if options else ""
        return f"extensions {', '.join(self.range_text(v) for v in extensions.values)}{suffix};\n"

    # -- fields

    def field(self, field: Field) -> str:
        label, kind = field.label, field.type
        if self.normalize:
            if kind not in SCALARS and not kind.startswith("map<"):
                kind = self.types.resolve_type(kind)
                found = self.types.types.get(kind[1:])
                if isinstance(found, Message) and found.is_map_entry():
                    key = next((f for f in found.fields if f.name == "key"), None)
                    value = next((f for f in found.fields if f.name == "value"), None)
                    if key is not None and value is not None:
                        kind = f"map<{key.type}, {value.type}>"
            if kind.startswith("map<"):
                key_type, _, value_type = kind[len("map<") : -1].partition(",")
                value_type = value_type.strip()
                resolved = self.types.resolve(value_type, self.types.types)
                if resolved is not None:
                    kind = f"map<{key_type.strip()}, .{resolved}>"
                label = None
        options = list(field.options)
        if field.default is not None:
            options.append(Option("default", _default_kind(kind), field.default))
        if field.json_name is not None:
            options.append(Option("json_name", "STRING", field.json_name))
        options = self.filter_options(options)
        suffix = " " + self.option_list(options) if options else ""
        return f"{label + ' ' if label else ''}{kind} {field.name} = {field.tag}{suffix};\n"

    # -- options

    def option_statement(self, option: Option) -> str:
        return f"option {self.option(option)};\n"

    def option(self, option: Option) -> str:
        name = f"({option.name})" if option.parenthesized else option.name
        if option.kind == "STRING":
            return f'{name} = "{escape(str(option.value))}"'
        if option.kind in ("BOOLEAN", "ENUM"):
            return f"{name} = {option.value}"
        if option.kind == "NUMBER":
            return f"{name} = {self.number(str(option.value))}"
        if option.kind == "OPTION":
            return f"{name}.{self.option(option.value)}"
        if option.kind == "MAP":
            return f"{name} = {{\n{self.option_map(option.value)}}}"
        return f"{name} = {self.option_list(option.value)}"

    def option_list(self, values: list) -> str:
        if len(values) == 1:
            return f"[{self.value(values[0])}]"
        last = len(values) - 1
        body = "".join(_indented(self.value(v) + ("," if i < last else "")) for i, v in enumerate(values))
        return f"[\n{body}]"

    def option_map(self, values: dict[str, Any]) -> str:
        if self.normalize:
            kept: dict[str, Any] = {}
            for key, value in values.items():
                if isinstance(value, list) and not value:
                    continue
                if key.startswith("[") and key.endswith("]"):
                    resolved = self.types.resolve(key[1:-1], self.types.extensions)
                    if resolved is not None:
                        key = f"[{resolved}]"
                kept.setdefault(key, value)
            values = dict(sorted(kept.items()))
        last = len(values) - 1
        return "".join(
            _indented(f"{key}: {self.value(value)}{',' if i < last else ''}")
            for i, (key, value) in enumerate(values.items())
        )

    def value(self, value: Any) -> str:
        if isinstance(value, str):
            return f'"{escape(value)}"'
        if isinstance(value, dict):
            return f"{{\n{self.option_map(value)}}}"
        if isinstance(value, list):
            if self.normalize and len(value) == 1:
                return self.value(value[0])
            last = len(value) - 1
            body = "".join(_indented(self.value(v) + ("," if i < last else "")) for i, v in enumerate(value))
            return f"[\n{body}]"
        if isinstance(value, Primitive):
            return self.number(value.value) if value.kind == "NUMBER" else value.value
        if isinstance(value, Option):
            return self.option(value)
        return str(value)

    def number(self, text: str) -> str:
        return _java_decimal(text) if self.normalize else text

    def filter_options(self, options: list[Option]) -> list[Option]:
        if self.ignore_extensions:  # custom options left out, Confluent's own kept
            options = [o for o in options if not o.parenthesized or o.name.startswith("confluent.")]
        if not self.normalize or not options:
            return options
        resolved = []
        for option in options:
            if option.parenthesized:
                name = self.types.resolve(option.name, self.types.extensions)
                if name is not None:
                    option = _transform(Option(name, option.kind, option.value, True))
            resolved.append(option)
        resolved.sort(key=lambda o: o.name)
        out: list[Option] = []
        for option in resolved:
            extension = self.types.extensions.get(option.name) if option.parenthesized else None
            previous = out[-1] if out else None
            if previous is not None and previous.name == option.name and extension is not None:
                if extension.label != "repeated":
                    out[-1] = self.merge(extension, previous, option)
                    continue
            out.append(option)
        return out

    def merge(self, extension: Field, existing: Option, replacement: Option) -> Option:
        replacement = _transform(replacement)
        if existing.kind == "MAP" and replacement.kind == "MAP":
            merged = self.merge_maps(extension, existing.value, replacement.value)
            return Option(replacement.name, "MAP", merged, replacement.parenthesized)
        return replacement

    def message_of(self, field: Field | None) -> Message | None:
        """The message type of an option's field, resolved where the option is written (as
        Confluent resolves it: a type nested in the option's message may not be found, and then
        a later setting replaces an earlier one)."""
        if field is None or field.type in SCALARS:
            return None
        found = self.types.resolve(field.type, self.types.types)
        element = self.types.types.get(found) if found else None
        return element if isinstance(element, Message) else None

    def merge_maps(self, container: Field, existing: dict, replacement: dict) -> dict:
        message = self.message_of(container)
        merged = dict(existing)
        for key, value in replacement.items():
            if key not in merged:
                merged[key] = value
                continue
            nested = _find_field(message, key) if message else None
            singular = nested is not None and nested.label != "repeated"
            old = merged[key]
            if singular and isinstance(old, dict) and isinstance(value, dict) and self.message_of(nested):
                assert nested is not None
                merged[key] = self.merge_maps(nested, old, value)
            elif singular:
                merged[key] = value
            else:
                values = [*(old if isinstance(old, list) else [old])]
                for item in value if isinstance(value, list) else [value]:
                    if item not in values:
                        values.append(item)
                merged[key] = values
        return merged


def _find_field(message: Message, name: str) -> Field | None:
    for member in [*message.fields, *(f for o in message.oneofs for f in o.fields)]:
        if member.name == name:
            return member
    return None


def _transform(option: Option) -> Option:
    """Wire's OPTION kind (``(a).b.c = 1``) as a MAP (``(a) = { b: { c: 1 } }``)."""
    if option.kind != "OPTION":
        return option
    return Option(option.name, "MAP", _transform_map(option), option.parenthesized)


def _transform_map(option: Option) -> dict[str, Any]:
    inner = option.value
    value: Any = inner.value
    if inner.kind in ("BOOLEAN", "ENUM", "NUMBER"):
        value = Primitive(inner.kind, inner.value)
    elif inner.kind == "OPTION":
        value = _transform_map(inner)
    return {inner.name: value}


def _start(value: Any) -> int:
    if isinstance(value, Range):
        return value.start
    if isinstance(value, int):
        return value
    return 2**31 - 1


def _default_kind(kind: str) -> str:
    simple = kind.rsplit(".", 1)[-1]
    if simple == "bool":
        return "BOOLEAN"
    if simple == "string":
        return "STRING"
    return "NUMBER" if simple in _NUMBER_KINDS else "ENUM"


def _indented(text: str) -> str:
    """Confluent's appendIndented: every line (Java's split: trailing empty ones dropped) after
    two spaces, blank ones too."""
    lines = text.split("\n")
    while len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return "".join(f"  {line}\n" for line in lines)


_ESCAPED = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
}


def escape(text: str) -> str:
    """Confluent's escapeChars."""
    return "".join(_ESCAPED.get(char, char) for char in text)


def _java_decimal(text: str) -> str:
    """A number as Java's ``DecimalFormat`` (no grouping) prints what commons-lang's
    ``NumberUtils.createNumber`` reads: an integer (decimal, ``0x`` hex, ``0`` octal) as its
    digits; a decimal with up to 7 fraction digits as a float, up to 16 as a double, then exact,
    printed with at most three fraction digits (half even, on the shortest digits of the float);
    what is not a number (``inf``, ``nan``) as written."""
    stripped = text.strip()
    try:
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", stripped):
            return str(int(stripped, 16))
        if re.fullmatch(r"[-+]?0[0-7]+", stripped):
            return str(int(stripped, 8))
        if re.fullmatch(r"[-+]?\d+", stripped):
            return str(int(stripped))
        found = re.fullmatch(r"[-+]?\d*(?:\.(\d*))?(?:[eE][-+]?\d+)?[fFdD]?", stripped)
        if found is None:
            return text
        literal = stripped.rstrip("fFdD")
        decimals = len(found.group(1) or "")
        number = Decimal(literal)
        if decimals <= 16:
            value = float(literal)
            if decimals <= 7:
                try:
                    value = struct.unpack("<f", struct.pack("<f", value))[0]
                except OverflowError:  # too big for a float: commons-lang takes a double
                    pass
            if value not in (float("inf"), float("-inf")):  # else exact, as commons-lang's BigDecimal
                number = Decimal(repr(value))
        rounded = number.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN, context=Context(prec=400))
    except (ValueError, InvalidOperation, OverflowError):  # too long to print: as written
        return text
    if rounded == rounded.to_integral():
        digits = format(rounded.to_integral(), "f")
    else:
        digits = format(rounded.normalize(), "f")
    return f"-{digits}" if number < 0 and not digits.startswith("-") else digits


def option_text(option: Option) -> str:
    """``name = value`` of one option, as Confluent prints it."""
    return _Printer(False, None).option(option)


def to_text(file: File, normalize: bool = False, types: Types | None = None, ignore_extensions: bool = False) -> str:
    """The text Confluent's registry stores for ``file`` (``normalize``: its normalized form;
    ``types``, the schema's own and imported types, are needed then; ``ignore_extensions``: the
    answer to ``format=ignore_extensions``, without custom options other than Confluent's own,
    extension ranges and ``extend`` blocks)."""
    return _Printer(normalize, types, ignore_extensions).file(file)
