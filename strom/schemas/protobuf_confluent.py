"""Confluent's own ``.proto`` files, which a schema imports without a reference (Confluent's
registry knows them as it knows ``google/protobuf/*.proto``, and confluent-kafka's serializers
skip them when they register references): ``confluent/meta.proto`` (the ``confluent.*_meta``
options: a doc, params, tags and rules on a file, message, field, enum or enum value),
``confluent/type/decimal.proto`` and ``confluent/type/variant.proto``.

And the reading of a ``confluent.*_meta`` option out of a descriptor's options, as Confluent's
``ProtobufSchema.toOption`` renders it: the one custom option Confluent keeps from a descriptor
(its descriptor parser knows Confluent's options and no others). A descriptor parsed here does
not know the extension either (unless the process imported confluent-kafka's ``meta_pb2``), so the
option is an unknown field of the options message, read with a ``Meta`` message class built from
the text below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.unknown_fields import UnknownFieldSet

from strom.schemas.protobuf_elements import Option

META = "confluent/meta.proto"
TEXTS = {
    META: """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}
message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal {
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
""",
    "confluent/type/variant.proto": """syntax = "proto3";
package confluent.type;
message Variant {
  bytes metadata = 1;
  bytes value = 2;
}
""",
}
META_FIELD = 1088
# the options message's full name -> the option's name
META_OPTIONS = {
    "google.protobuf.FileOptions": "confluent.file_meta",
    "google.protobuf.MessageOptions": "confluent.message_meta",
    "google.protobuf.FieldOptions": "confluent.field_meta",
    "google.protobuf.EnumOptions": "confluent.enum_meta",
    "google.protobuf.EnumValueOptions": "confluent.enum_value_meta",
}
_PARAMS_VALUE_FIRST = ("precision", "scale")  # Confluent writes these two value first


def meta_option(options: Any, meta_class: Callable[[], Any]) -> Option | None:
    """The ``confluent.*_meta`` option of a descriptor's options message, or None.

    ``meta_class`` gives the class of ``confluent.Meta`` whose ``params`` are its entries in the
    order sent (a repeated message, not a map)."""
    name = META_OPTIONS.get(options.DESCRIPTOR.full_name)
    if name is None:
        return None
    found = [f.data for f in UnknownFieldSet(options) if f.field_number == META_FIELD and f.wire_type == 2]
    # known when the process imported a module that declares it (confluent-kafka's meta_pb2)
    found += [
        value.SerializeToString() for f, value in options.ListFields() if f.is_extension and f.number == META_FIELD
    ]
    if not found:
        return None
    meta = meta_class().FromString(b"".join(found))
    value: dict[str, Any] = {}
    if meta.doc:
        value["doc"] = meta.doc
    if meta.params:
        value["params"] = [
            {"value": p.value, "key": p.key} if p.key in _PARAMS_VALUE_FIRST else {"key": p.key, "value": p.value}
            for p in meta.params
        ]
    if meta.tags:
        value["tags"] = list(meta.tags)
    rules = []
    for rule in meta.rules:
        entry = {key: getattr(rule, key) for key in ("name", "doc", "expr", "sql") if getattr(rule, key)}
        if entry:
            rules.append(entry)
    if rules:
        value["rules"] = rules
    return Option(name, "MAP", value, True) if value else None


def _strings(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _messages(value: Any) -> list[dict]:
    return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, dict)]


def encode_meta(value: dict[str, Any], meta_class: Callable[[], Any]) -> bytes:
    """A ``confluent.*_meta`` option written in text (an aggregate value: doc, params, tags,
    rules) as the extension field of an options message, so that the descriptor of the text
    (``format=serialized``) carries it as protoc's would, and as Confluent's does."""
    meta = meta_class()()
    if "doc" in value:
        meta.doc = str(value["doc"])
    for entry in _messages(value.get("params", [])):
        meta.params.add(key=str(entry.get("key", "")), value=str(entry.get("value", "")))
    meta.tags.extend(_strings(value.get("tags", [])))
    for entry in _messages(value.get("rules", [])):
        meta.rules.add(**{k: str(v) for k, v in entry.items() if k in ("name", "doc", "expr", "sql")})
    data = meta.SerializeToString()
    return _varint(META_FIELD << 3 | 2) + _varint(len(data)) + data


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)
