"""Confluent's Protobuf message indexes: which message of a schema a framed record holds.

A Protobuf schema (a ``.proto`` file) may define many messages, so Confluent's Protobuf
serializers write, after the 5-byte prefix (magic byte 0, the 4-byte schema id), the path of the
record's message in the file: a zig-zag varint count, then that many zig-zag varint indexes, the
first into the file's top-level messages, each next one into the nested messages of the one
before (map fields' ``...Entry`` messages count, where the field is declared, as protoc places
them). A single 0 byte (a count of 0) is the first message, ``[0]``. Confluent's
``RecordNameStrategy`` names a record's subject by that message's full name, so produce-side
validation with a record-name strategy reads the indexes of a Protobuf id's records (and only
those: the prefix of any other record is its 5 bytes) and refuses a record whose indexes are
malformed or name no message.

Validation groups records by their prefix extended with the index bytes, so each distinct (id,
indexes) of a batch is resolved once, and the names of an id's messages are listed once per id
(``message_names``) and cached by the registry's view. Such batches take validation's full walk:
its fast walk matches 5-byte prefixes only.
"""

from __future__ import annotations

from collections.abc import Callable

from proto_schema_parser import ast

from strom.iceberg.protobuf_columns import message_indexes
from strom.schemas import protobuf

PREFIX_SIZE = 5
MAX_BYTES = 10 * 65  # the most bytes an index section the parser accepts takes (64 indexes of 10 bytes)


class MalformedIndexes(ValueError):
    """Message indexes that cannot be read (the reason is the message)."""


def read(data: bytes | memoryview, position: int, end: int) -> tuple[tuple[int, ...], int]:
    """(the indexes, the position after them) of the index section at ``position``, read within
    ``end`` by the one parser of them (strom.iceberg.protobuf_columns.message_indexes); a negative
    index names no message either."""
    try:
        indexes, after = message_indexes(bytes(data[position : min(end, position + MAX_BYTES)]), 0)
    except IndexError:
        raise MalformedIndexes("its Protobuf message indexes run past its end") from None
    except ValueError as exc:
        raise MalformedIndexes(f"its Protobuf message indexes do not decode: {exc}") from None
    if min(indexes) < 0:
        raise MalformedIndexes(f"its Protobuf message indexes hold a negative index {min(indexes)}")
    return indexes, position + after


def message_names(schema: str) -> dict[tuple[int, ...], str] | None:
    """Every message path of a ``.proto`` text and the message's full name; None when the text does
    not parse. Read from the syntax tree: the paths need no type resolved, nor any reference."""
    tree = protobuf.syntax_tree(schema)
    if tree is None:
        return None
    package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
    names: dict[tuple[int, ...], str] = {}
    _walk(tree.file_elements, package, (), names)
    return names


def _walk(elements: list, scope: str, path: tuple[int, ...], names: dict[tuple[int, ...], str]) -> None:
    index = 0
    for element in elements:
        if isinstance(element, ast.Message):
            full = f"{scope}.{element.name}" if scope else element.name
            names[(*path, index)] = full
            _walk(element.elements, full, (*path, index), names)
            index += 1
        elif isinstance(element, ast.MapField):  # its entry message, as protoc nests it
            entry = protobuf.map_entry_name(element.name)
            names[(*path, index)] = f"{scope}.{entry}" if scope else entry
            index += 1


def extender(is_protobuf: Callable[[int], bool]) -> Callable[[bytes, int, int], int]:
    """For validation's record walk: the length of a value's (key's) prefix at ``start`` (its
    bytes end at ``end``, 5 or more from ``start``): 5, or for a Protobuf id's record 5 plus its
    index bytes (as far as they go when malformed, for ``record_name`` to say why). Ids are asked
    about once per check."""
    protobuf_ids: dict[int, bool] = {}

    def length(payload: bytes, start: int, end: int) -> int:
        if payload[start] != 0:
            return PREFIX_SIZE
        schema_id = int.from_bytes(payload[start + 1 : start + PREFIX_SIZE], "big")
        known = protobuf_ids.get(schema_id)
        if known is None:
            known = protobuf_ids[schema_id] = is_protobuf(schema_id)
        if not known:
            return PREFIX_SIZE
        try:
            return read(payload, start + PREFIX_SIZE, end)[1] - start
        except MalformedIndexes:
            return min(end - start, PREFIX_SIZE + MAX_BYTES)

    return length


def record_name(data: bytes, schema_id: int, names: Callable[[int, tuple[int, ...]], str | None]) -> str | None:
    """The full name of the message a Protobuf record's prefix (``data``: 5 bytes and its index
    bytes) names; MalformedIndexes when the indexes are malformed or name no message."""
    indexes, _ = read(data, PREFIX_SIZE, len(data))
    name = names(schema_id, indexes)
    if name is None:
        path = ", ".join(map(str, indexes))
        raise MalformedIndexes(f"its Protobuf message indexes [{path}] name no message of schema id {schema_id}")
    return name
