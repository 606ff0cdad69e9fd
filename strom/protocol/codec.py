"""Bounded decoding of Kafka messages into kio's dataclasses, and encoding back.

Why not kio's own reader: kio 0.6.5's native reader pre-allocates arrays
from the count on the wire, so a 20-byte request claiming 2**31-1 elements
aborts the whole process. This reader takes the message layout from kio's
dataclass metadata (field order, `kafka_type`, nullability, tags, nested
entities, `__flexible__`) but bounds every length and count by the bytes
left, and turns every malformed input into DecodeError.

Why generated code: the decoder runs for every request, so each entity class
is compiled once into a small Python function (runs of fixed-size fields
become one struct unpack, nested entities call their own compiled reader),
and decoding does no reflection.

Values match kio's native reader: ints are plain ints, timedelta_* fields are
`timedelta`, datetime_i64 is a UTC `datetime` (nullable: -1 is None), the
all-zero uuid is None, error codes are `ErrorCode` members. `records` fields
are memoryview slices of the input (never copied or parsed) and stay valid as
long as the input buffer is not mutated.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import MISSING, fields
from datetime import UTC, datetime, timedelta
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, cast, get_args, get_origin
from uuid import UUID

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .api import request_class, response_class
from .errors import DecodeError, ErrorCode, UnsupportedVersionError

if TYPE_CHECKING:
    from dataclasses import Field

    from kio.static.protocol import Entity

__all__ = [
    "DecodeError",
    "decode",
    "decode_request",
    "decode_response",
    "encode",
    "encode_request",
    "encode_response",
    "read_uvarint",
    "skip_tagged_fields",
]

Buffer = bytes | bytearray | memoryview
Reader = Callable[[memoryview, int], tuple[Any, int]]

# Everything a malformed buffer can make the generated readers raise; all of
# it becomes DecodeError at the entry points.
_MALFORMED = (struct.error, IndexError, ValueError, OverflowError)


# --- public entry points ---------------------------------------------------


def decode(cls: type[Entity], buf: Buffer, offset: int = 0) -> tuple[Any, int]:
    """Decode one `cls` (any kio entity) at `offset`; returns it and the offset after it."""
    reader = _READERS.get(cls) or _compile(cls)
    view = buf if isinstance(buf, memoryview) and buf.format == "B" else memoryview(buf).cast("B")
    try:
        return reader(view, offset)
    except DecodeError as exc:
        raise DecodeError(f"{cls.__qualname__} v{cls.__version__}: {exc}") from None
    except _MALFORMED as exc:
        raise DecodeError(f"{cls.__qualname__} v{cls.__version__}: malformed ({exc})") from None


def decode_request(api_key: int, api_version: int, body: Buffer, offset: int = 0) -> Any:
    """Decode a request body. Trailing bytes are ignored (librdkafka's Metadata v9+ sends some)."""
    cls = request_class(api_key, api_version)
    if cls is None:
        raise UnsupportedVersionError(f"no schema for api_key {api_key} version {api_version}")
    return decode(cls, body, offset)[0]


def decode_response(api_key: int, api_version: int, body: Buffer, offset: int = 0) -> Any:
    """Decode a response body (follower fetches, tools)."""
    cls = response_class(api_key, api_version)
    if cls is None:
        raise UnsupportedVersionError(f"no schema for api_key {api_key} version {api_version}")
    return decode(cls, body, offset)[0]


def encode(obj: Any) -> bytes:
    """Encode a kio entity with kio's pure-Python writer (no header, no size prefix).

    Fine for control-plane messages; hot responses (Produce, Fetch) are encoded
    by hand as chunk lists so that record bytes are never copied.
    """
    out = io.BytesIO()
    entity_writer(type(obj))(out, obj)
    return out.getvalue()


encode_response = encode
encode_request = encode


# --- primitives --------------------------------------------------------------


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes, as Kafka's ByteUtils.readUnsignedVarint."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("varint is longer than 5 bytes")


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section: unknown tags are ignored, as Kafka does."""
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise DecodeError(f"tagged field of {size} bytes runs past the end")
    return pos


def _read_tags(buf: memoryview, pos: int, known: dict[int, tuple[str, Reader]]) -> tuple[dict[str, Any], int]:
    # Each known tag is decoded from a view cut to its declared size, so a
    # lying field cannot read into its neighbours.
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    values = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} of {size} bytes runs past the end")
        entry = known.get(tag)
        if entry is not None:
            values[entry[0]] = entry[1](buf[pos:end], 0)[0]
        pos = end
    return values, pos


def _length(compact: bool, wide: bool) -> Callable[[memoryview, int], tuple[int, int]]:
    """Reader of a string/bytes/array length; -1 means null in both encodings."""
    if compact:

        def read_compact(buf: memoryview, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos

        return read_compact
    unpack = (_I32 if wide else _I16).unpack_from
    size = 4 if wide else 2

    def read_legacy(buf: memoryview, pos: int) -> tuple[int, int]:
        return unpack(buf, pos)[0], pos + size

    return read_legacy


def _blob(kind: str, compact: bool, nullable: bool, name: str) -> Reader:
    """Reader for string / bytes / records fields."""
    length = _length(compact, wide=kind != "string")

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = length(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{name}: invalid {kind} length {n}")
        end = pos + n
        if end > len(buf):
            raise DecodeError(f"{name}: {kind} of {n} bytes runs past the end ({len(buf) - pos} left)")
        if kind == "string":
            return str(buf[pos:end], "utf-8"), end
        if kind == "bytes":
            return bytes(buf[pos:end]), end
        return buf[pos:end], end  # records: a view, never copied

    return read


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ZERO_UUID = bytes(16)
_ERROR_CODES = {int(code): code for code in ErrorCode}


def _error_code(value: int) -> ErrorCode:
    return _ERROR_CODES.get(value, ErrorCode.UNKNOWN_SERVER_ERROR)


def _timedelta_ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


def _datetime_ms(value: int) -> datetime:
    # Negative values are kept, not refused: only responses have non-nullable datetime fields, and
    # Kafka answers -1 in them for "no time" (DescribeTransactions of a transactional id in Empty).
    return _EPOCH + timedelta(milliseconds=value)


def _nullable_datetime_ms(value: int) -> datetime | None:
    return None if value == -1 else _datetime_ms(value)


def _uuid(value: bytes) -> UUID | None:
    return None if value == _ZERO_UUID else UUID(bytes=value)


# kafka_type -> (struct code, conversion) for fixed-size types.
_FIXED: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "bool": ("?", None),
    "int8": ("b", None),
    "int16": ("h", None),
    "int32": ("i", None),
    "int64": ("q", None),
    "uint8": ("B", None),
    "uint16": ("H", None),
    "uint32": ("I", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "error_code": ("h", _error_code),
    "timedelta_i32": ("i", _timedelta_ms),
    "timedelta_i64": ("q", _timedelta_ms),
    "datetime_i64": ("q", _datetime_ms),
    "uuid": ("16s", _uuid),
}


def _fixed(kafka_type: str, nullable: bool) -> tuple[str, Callable[[Any], Any] | None] | None:
    spec = _FIXED.get(kafka_type)
    if spec is not None and kafka_type == "datetime_i64" and nullable:
        return ("q", _nullable_datetime_ms)
    return spec


def _fixed_reader(code: str, conv: Callable[[Any], Any] | None) -> Reader:
    unpack, size = struct.Struct(">" + code).unpack_from, struct.calcsize(">" + code)
    if conv is None:
        return lambda buf, pos: (unpack(buf, pos)[0], pos + size)
    return lambda buf, pos: (conv(unpack(buf, pos)[0]), pos + size)


# --- per-class compilation -----------------------------------------------------

_READERS: dict[type[Entity], Reader] = {}
_MIN_SIZES: dict[type[Entity], int] = {}
_COMPILING: set[type[Entity]] = set()


class _Field:
    """How one field is read.

    kind is "fixed" (inlined struct code + conversion), "blob" (string/bytes/
    records, inlined), "entities" (array of entities, inlined loop) or "call"
    (everything else: a reader function).
    """

    __slots__ = (
        "name",
        "kind",
        "code",
        "conv",
        "reader",
        "min_size",
        "blob",
        "compact",
        "nullable",
        "item",
        "item_min",
    )
    name: str
    kind: str
    code: str | None  # struct code, for "fixed" fields and arrays of them
    conv: Callable[[Any], Any] | None
    reader: Reader
    min_size: int
    blob: str | None  # kafka_type of a "blob" field
    compact: bool
    nullable: bool
    item: Reader | None  # element reader of an "entities" array
    item_min: int

    def __init__(self, name: str, kind: str, reader: Reader, min_size: int, **extra: Any) -> None:
        self.name, self.kind, self.reader, self.min_size = name, kind, reader, min_size
        self.code = self.conv = self.blob = None
        self.compact = self.nullable = False
        self.item, self.item_min = None, 1
        for key, value in extra.items():
            setattr(self, key, value)


def _array(
    item: Reader, item_min: int, compact: bool, nullable: bool, name: str, code: str | None, conv: Any
) -> Reader:
    length = _length(compact, wide=True)
    item_min = max(item_min, 1)  # as Kafka: a count above the bytes left is an error
    size = struct.calcsize(">" + code) if code else 0

    def read(buf: memoryview, pos: int) -> tuple[tuple[Any, ...] | None, int]:
        n, pos = length(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{name}: invalid array length {n}")
        if n * item_min > len(buf) - pos:
            raise DecodeError(f"{name}: {n} elements cannot fit in {len(buf) - pos} bytes")
        if code is not None:  # fixed-size elements: one unpack for the whole array
            values = struct.unpack_from(f">{n}{code}", buf, pos)
            return (values if conv is None else tuple(map(conv, values))), pos + n * size
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            value, pos = item(buf, pos)
            append(value)
        return tuple(out), pos

    return read


def _nullable_entity(read_entity: Reader) -> Reader:
    # KIP-893: an int8 marker; negative means null (Kafka's reader tests < 0).
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        if buf[pos] >= 0x80:
            return None, pos + 1
        return read_entity(buf, pos + 1)

    return read


def _outer_nullable(field: Field[Any]) -> bool:
    """Nullability of the field itself (for arrays, of the array, not its elements)."""
    return get_origin(field.type) is UnionType and NoneType in get_args(field.type)


def _blob_min(kafka_type: str, flexible: bool) -> int:
    return 1 if flexible else (2 if kafka_type == "string" else 4)


def _plan_field(field: Field[Any], flexible: bool, tagged: bool) -> _Field:
    name = field.name
    kind = classify_field(field)
    kafka_type: str = field.metadata.get("kafka_type", "")  # primitive fields all have one
    code: str | None
    conv: Callable[[Any], Any] | None
    if isinstance(kind, PrimitiveField):
        nullable = is_optional(field)
        fixed = _fixed(kafka_type, nullable)
        if fixed is not None:
            code, conv = fixed
            return _Field(name, "fixed", _fixed_reader(code, conv), struct.calcsize(">" + code), code=code, conv=conv)
        if kafka_type not in ("string", "bytes", "records"):
            raise TypeError(f"{name}: unsupported kafka_type {kafka_type!r}")
        reader = _blob(kafka_type, flexible, nullable, name)
        return _Field(
            name, "blob", reader, _blob_min(kafka_type, flexible), blob=kafka_type, compact=flexible, nullable=nullable
        )
    if isinstance(kind, EntityField):
        reader = _entity_reader(kind.type_)
        if is_optional(field) and not tagged:
            return _Field(name, "call", _nullable_entity(reader), 1)
        return _Field(name, "call", reader, _MIN_SIZES.get(kind.type_, 0))
    nullable = _outer_nullable(field)
    array_min = 1 if flexible else 4
    if isinstance(kind, EntityTupleField):
        item, item_min = _entity_reader(kind.type_), max(_MIN_SIZES.get(kind.type_, 0), 1)
        reader = _array(item, item_min, flexible, nullable, name, None, None)
        return _Field(
            name, "entities", reader, array_min, compact=flexible, nullable=nullable, item=item, item_min=item_min
        )
    assert isinstance(kind, PrimitiveTupleField)
    code = conv = None
    fixed = _fixed(kafka_type, False)
    if fixed is not None:
        code, conv = fixed
        item, item_min = _fixed_reader(code, conv), struct.calcsize(">" + code)
        if code == "16s":  # ">3" + "16s" would mean one 316-byte string
            code = conv = None
    else:
        item, item_min = _blob(kafka_type, flexible, False, f"{name}[]"), _blob_min(kafka_type, flexible)
    return _Field(name, "call", _array(item, item_min, flexible, nullable, name, code, conv), array_min)


def _entity_reader(cls: type[Entity]) -> Reader:
    reader = _READERS.get(cls)
    if reader is None:
        if cls in _COMPILING:  # a recursive schema: resolve at call time
            return lambda buf, pos: _READERS[cls](buf, pos)
        reader = _compile(cls)
    return reader


def _compile(cls: type[Entity]) -> Reader:
    """Generate `read(buf, pos) -> (cls instance, pos)` for one kio entity class."""
    _COMPILING.add(cls)
    try:
        flexible = cls.__flexible__
        plain: list[_Field] = []
        tagged: dict[int, tuple[str, Reader]] = {}
        defaults: dict[str, Any] = {}
        for f in fields(cls):
            tag = get_field_tag(f)
            if tag is None:
                plain.append(_plan_field(f, flexible, tagged=False))
            else:
                tagged[tag] = (f.name, _plan_field(f, flexible, tagged=True).reader)
                defaults[f.name] = f.default if f.default is not MISSING else get_tagged_field_default(f)
        _MIN_SIZES[cls] = sum(p.min_size for p in plain) + (1 if flexible else 0)
        source, env = _generate(cls, plain, defaults, tagged, flexible)
        exec(compile(source, f"<strom.codec {cls.__module__}.{cls.__qualname__}>", "exec"), env)
        reader: Reader = env["read"]
        _READERS[cls] = reader
        return reader
    finally:
        _COMPILING.discard(cls)


def _bad_length(name: str, what: str, n: int) -> None:
    raise DecodeError(f"{name}: invalid {what} length {n}")


def _overrun(name: str, what: str, n: int, left: int) -> None:
    raise DecodeError(f"{name}: {what} of {n} cannot fit in the {left} bytes left")


_VALUE = {"string": 'str(buf[pos:end], "utf-8")', "bytes": "bytes(buf[pos:end])", "records": "buf[pos:end]"}


def _length_lines(compact: bool, wide: bool) -> list[str]:
    if compact:  # a one-byte varint is by far the common case
        return ["n = buf[pos]", "if n < 0x80:", "    pos += 1", "else:", "    n, pos = UVARINT(buf, pos)", "n -= 1"]
    return [f"n, = {'I32' if wide else 'I16'}(buf, pos)", f"pos += {4 if wide else 2}"]


def _null_check(i: int, f: _Field, what: str, body: list[str]) -> list[str]:
    if not f.nullable:
        return [f"if n < 0: BAD_LENGTH(N{i}, {what!r}, n)", *body]
    head = ["if n < 0:", f"    if n != -1: BAD_LENGTH(N{i}, {what!r}, n)", f"    v{i} = None", "else:"]
    return head + ["    " + line for line in body]


def _field_lines(i: int, f: _Field, env: dict[str, Any]) -> list[str]:
    env[f"N{i}"] = f.name
    if f.kind == "blob":
        assert f.blob is not None
        body = [
            "end = pos + n",
            f"if end > len(buf): OVERRUN(N{i}, {f.blob!r}, n, len(buf) - pos)",
            f"v{i} = {_VALUE[f.blob]}",
            "pos = end",
        ]
        return _length_lines(f.compact, f.blob != "string") + _null_check(i, f, f.blob, body)
    if f.kind == "entities":
        env[f"R{i}"] = f.item
        body = [
            f"if n * {f.item_min} > len(buf) - pos: OVERRUN(N{i}, 'array', n, len(buf) - pos)",
            "out = []",
            "append = out.append",
            "for _ in range(n):",
            f"    x, pos = R{i}(buf, pos)",
            "    append(x)",
            f"v{i} = tuple(out)",
        ]
        return _length_lines(f.compact, True) + _null_check(i, f, "array", body)
    env[f"R{i}"] = f.reader
    return [f"v{i}, pos = R{i}(buf, pos)"]


def _generate(
    cls: type[Entity],
    plain: list[_Field],
    defaults: dict[str, Any],
    tagged: dict[int, tuple[str, Reader]],
    flexible: bool,
) -> tuple[str, dict[str, Any]]:
    env: dict[str, Any] = {
        "NEW": object.__new__,
        "CLS": cls,
        "UVARINT": read_uvarint,
        "I16": _I16.unpack_from,
        "I32": _I32.unpack_from,
        "BAD_LENGTH": _bad_length,
        "OVERRUN": _overrun,
    }
    body: list[str] = []
    run: list[tuple[int, _Field]] = []

    def flush() -> None:
        if not run:
            return
        fmt = ">" + "".join(cast(str, f.code) for _, f in run)
        first = run[0][0]
        env[f"S{first}"] = struct.Struct(fmt).unpack_from
        body.append(f"{''.join(f'v{i}, ' for i, _ in run)}= S{first}(buf, pos)")
        body.append(f"pos += {struct.calcsize(fmt)}")
        for i, f in run:
            if f.conv is not None:
                env[f"C{i}"] = f.conv
                body.append(f"v{i} = C{i}(v{i})")
        run.clear()

    for i, f in enumerate(plain):
        if f.kind == "fixed":
            run.append((i, f))
        else:
            flush()
            body += _field_lines(i, f, env)
    flush()
    if flexible and tagged:
        env["READ_TAGS"], env["TAGS"], env["EMPTY"] = _read_tags, tagged, {}
        body += [
            "if buf[pos]:",
            "    tags, pos = READ_TAGS(buf, pos, TAGS)",
            "else:",
            "    tags = EMPTY",
            "    pos += 1",
        ]
    elif flexible:
        env["SKIP_TAGS"] = skip_tagged_fields
        body += ["if buf[pos]:", "    pos = SKIP_TAGS(buf, pos)", "else:", "    pos += 1"]
    # kio's classes are frozen slotted dataclasses without __post_init__, so
    # filling the slots directly builds the same object as __init__, 2-3x faster.
    body.append("o = NEW(CLS)")
    for i, f in enumerate(plain):
        env[f"SET{i}"] = getattr(cls, f.name).__set__
        body.append(f"SET{i}(o, v{i})")
    for j, (name, default) in enumerate(defaults.items()):
        env[f"SETT{j}"], env[f"D{j}"] = getattr(cls, name).__set__, default
        body.append(f"SETT{j}(o, tags.get({name!r}, D{j}))")
    body.append("return o, pos")
    return "def read(buf, pos):\n" + "".join(f"    {line}\n" for line in body), env
