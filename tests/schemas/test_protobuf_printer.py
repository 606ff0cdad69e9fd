"""Confluent's Protobuf printer (strom.schemas.protobuf_printer over strom.schemas.protobuf_elements):
the texts below are what Confluent's ``ProtobufSchemaUtils.toString`` and ``toNormalizedString``
print, written out from its rules (layout, option order and kinds, what a descriptor keeps)."""

import base64

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from strom.schemas import protobuf, protobuf_confluent

FDP = descriptor_pb2.FileDescriptorProto
F = descriptor_pb2.FieldDescriptorProto

EVERY_KIND = r"""syntax = "proto2";
package shop;
import "google/protobuf/descriptor.proto";
option java_package = "com.example.shop";
option optimize_for = SPEED;
option (shop.file_tags) = { name: "orders" tags: ["a", "b"] level: HIGH weight: 2 };
extend google.protobuf.FieldOptions { optional string sensitive = 50001; }
enum Kind { option allow_alias = true; A = 0; B = 0 [deprecated = true]; reserved 5 to 9, 20; }
message Order {
  option deprecated = true;
  required string id = 1 [json_name = "orderId", (sensitive) = "pii"];
  optional int32 n = 2 [default = 7, deprecated = true];
  optional Kind kind = 3 [default = B];
  repeated int32 nums = 4 [packed = true];
  map<string, Line> lines = 5;
  oneof pay { string card = 6; string cash = 7 [(sensitive) = "x"]; }
  extensions 100 to 199, 300 to max;
  reserved 10, 12 to 14;
  reserved "gone";
  message Line { optional string sku = 1 [default = "a\"b\n"]; }
}
service Shop { rpc Get (Order) returns (stream Order.Line) { option deprecated = true; } }
"""

EVERY_KIND_PRINTED = """syntax = "proto2";
package shop;

import "google/protobuf/descriptor.proto";

option java_package = "com.example.shop";
option optimize_for = SPEED;
option (shop.file_tags) = {
  name: "orders",
  tags: [
    "a",
    "b"
  ],
  level: HIGH,
  weight: 2
};

message Order {
  reserved 10, 12 to 14;
  reserved "gone";

  option deprecated = true;

  required string id = 1 [
    (sensitive) = "pii",
    json_name = "orderId"
  ];
  optional int32 n = 2 [
    deprecated = true,
    default = 7
  ];
  optional Kind kind = 3 [default = B];
  repeated int32 nums = 4 [packed = true];
  map<string, Line> lines = 5;

  oneof pay {
    string card = 6;
    string cash = 7 [(sensitive) = "x"];
  }

  extensions 100 to 199, 300 to max;

  message Line {
    optional string sku = 1 [default = "a\\"b\\n"];
  }
}
enum Kind {
  reserved 5 to 9, 20;
  option allow_alias = true;
  A = 0;
  B = 0 [deprecated = true];
}

extend google.protobuf.FieldOptions {
  optional string sensitive = 50001;
}

service Shop {
  rpc Get (Order) returns (stream Order.Line) {
    option deprecated = true;
  };
}
"""

EVERY_KIND_NORMALIZED = """package shop;

import "google/protobuf/descriptor.proto";

option java_package = "com.example.shop";
option optimize_for = SPEED;
option (shop.file_tags) = {
  level: HIGH,
  name: "orders",
  tags: [
    "a",
    "b"
  ],
  weight: 2
};

message Order {
  reserved 10;
  reserved 12 to 14;
  reserved "gone";

  option deprecated = true;

  required string id = 1 [
    json_name = "orderId",
    (shop.sensitive) = "pii"
  ];
  optional int32 n = 2 [
    default = 7,
    deprecated = true
  ];
  optional .shop.Kind kind = 3 [default = B];
  repeated int32 nums = 4 [packed = true];
  map<string, .shop.Order.Line> lines = 5;

  oneof pay {
    string card = 6;
    string cash = 7 [(shop.sensitive) = "x"];
  }

  extensions 100 to 199;
  extensions 300 to max;

  message Line {
    optional string sku = 1 [default = "a\\"b\\n"];
  }
}
enum Kind {
  reserved 5 to 9;
  reserved 20;
  option allow_alias = true;
  A = 0;
  B = 0 [deprecated = true];
}

extend .google.protobuf.FieldOptions {
  optional string sensitive = 50001;
}

service Shop {
  rpc Get (.shop.Order) returns (stream .shop.Order.Line) {
    option deprecated = true;
  };
}
"""


def test_text_is_printed_as_confluent_prints_it_with_every_kind_of_option():
    parsed, text = protobuf.parse(EVERY_KIND)
    assert text == EVERY_KIND_PRINTED
    assert protobuf.parse(text)[1] == text  # a fixed point
    assert parsed.normalized() == EVERY_KIND_NORMALIZED
    assert protobuf.parse(EVERY_KIND_NORMALIZED)[0].normalized() == EVERY_KIND_NORMALIZED


def protoc_like() -> FDP:
    """The descriptor protoc makes of ORDER (json_name on every field, as protoc sets it)."""
    file = FDP(name="shop/order.proto", package="shop", syntax="proto3", dependency=["google/protobuf/timestamp.proto"])
    file.options.java_package = "com.example.shop"
    file.options.go_package = "example.com/shop;shop"
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="id")
    order.field.add(
        name="lines",
        number=2,
        label=F.LABEL_REPEATED,
        type=F.TYPE_MESSAGE,
        type_name=".shop.Order.Line",
        json_name="lines",
    )
    counts = order.field.add(
        name="counts",
        number=3,
        label=F.LABEL_REPEATED,
        type=F.TYPE_MESSAGE,
        type_name=".shop.Order.CountsEntry",
        json_name="counts",
    )
    counts.options.deprecated = True
    order.field.add(
        name="status",
        number=4,
        label=F.LABEL_OPTIONAL,
        type=F.TYPE_ENUM,
        type_name=".shop.Order.Status",
        json_name="status",
        oneof_index=1,
        proto3_optional=True,
    )
    order.field.add(name="card", number=5, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="card", oneof_index=0)
    order.field.add(
        name="at",
        number=6,
        label=F.LABEL_OPTIONAL,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        json_name="at",
    )
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_status")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="sku")
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="key")
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32, json_name="value")
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1).options.deprecated = True
    order.reserved_range.add(start=20, end=23)
    order.reserved_name.append("old")
    return file


ORDER = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";
option go_package = "example.com/shop;shop";
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int32> counts = 3 [deprecated = true];
  optional Status status = 4;
  oneof payment { string card = 5; }
  google.protobuf.Timestamp at = 6;
  reserved 20 to 22;
  reserved "old";
  message Line { string sku = 1; }
  enum Status { NEW = 0; PAID = 1 [deprecated = true]; }
}
"""

# Confluent's rendering of protoc_like(): type names as the descriptor has them, the map as its
# entry message, json_name kept, proto3's implicit label left out
DESCRIPTOR_PRINTED = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

option java_package = "com.example.shop";
option go_package = "example.com/shop;shop";

message Order {
  reserved 20 to 22;
  reserved "old";

  string id = 1 [json_name = "id"];
  repeated .shop.Order.Line lines = 2 [json_name = "lines"];
  repeated .shop.Order.CountsEntry counts = 3 [
    deprecated = true,
    json_name = "counts"
  ];
  optional .shop.Order.Status status = 4 [json_name = "status"];
  .google.protobuf.Timestamp at = 6 [json_name = "at"];

  oneof payment {
    string card = 5 [json_name = "card"];
  }

  message Line {
    string sku = 1 [json_name = "sku"];
  }
  message CountsEntry {
    option map_entry = true;
  
    string key = 1 [json_name = "key"];
    int32 value = 2 [json_name = "value"];
  }
  enum Status {
    NEW = 0;
    PAID = 1 [deprecated = true];
  }
}
"""

ORDER_NORMALIZED = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

option go_package = "example.com/shop;shop";
option java_package = "com.example.shop";

message Order {
  reserved 20 to 22;
  reserved "old";

  string id = 1;
  repeated .shop.Order.Line lines = 2;
  map<string, int32> counts = 3 [deprecated = true];
  optional .shop.Order.Status status = 4;
  .google.protobuf.Timestamp at = 6;

  oneof payment {
    string card = 5;
  }

  message Line {
    string sku = 1;
  }
  enum Status {
    NEW = 0;
    PAID = 1 [deprecated = true];
  }
}
"""


def encoded(file: FDP) -> str:
    return base64.standard_b64encode(file.SerializeToString()).decode()


def test_a_descriptor_keeps_what_confluent_keeps():
    parsed, text = protobuf.parse(encoded(protoc_like()))
    assert text == DESCRIPTOR_PRINTED
    # the stored text parses back to the same schema, maps as maps
    again, again_text = protobuf.parse(text)
    assert again_text == text and again.same(parsed)
    assert again.file.message_type[0].nested_type[1].options.map_entry


def test_normalize_gives_one_text_for_a_text_and_its_descriptor():
    """Confluent gives one id to a text and its descriptor when both are normalized and the
    descriptor carries nothing the text lacks (protoc's json_name is such a thing)."""
    from_text, _ = protobuf.parse(ORDER)
    assert from_text.normalized() == ORDER_NORMALIZED
    bare = protoc_like()
    for message in [bare.message_type[0], *bare.message_type[0].nested_type]:
        for member in message.field:
            member.ClearField("json_name")
    assert protobuf.parse(encoded(bare))[0].normalized() == ORDER_NORMALIZED
    # with protoc's json_name on every field, Confluent keeps them, normalized too
    with_names = protobuf.parse(encoded(protoc_like()))[0].normalized()
    assert 'string id = 1 [json_name = "id"];' in with_names and with_names != ORDER_NORMALIZED
    # strom's own descriptor of the text (format=serialized) is the same schema
    assert protobuf.parse(from_text.serialized())[0].normalized() == ORDER_NORMALIZED


RELAID = """// the same schema, written in another order
syntax = "proto3";
import "google/protobuf/timestamp.proto";
package shop;
option go_package = "example.com/shop;shop";
option java_package = "com.example.shop";
message Order {
  enum Status { NEW = 0; PAID = 1 [deprecated = true]; }
  message Line { string sku = 1; }
  reserved "old";
  .google.protobuf.Timestamp at = 6;
  oneof payment { string card = 5; }
  optional Order.Status status = 4;
  map<string, int32> counts = 3 [deprecated = true];
  repeated .shop.Order.Line lines = 2;
  string id = 1;
  reserved 20 to 22;
}
"""


def test_normalize_gives_one_text_for_two_layouts():
    parsed, text = protobuf.parse(RELAID)
    assert text != protobuf.parse(ORDER)[1]
    assert parsed.normalized() == ORDER_NORMALIZED


def test_normalized_numbers_and_option_maps():
    text = """syntax = "proto3";
package p;
import "google/protobuf/descriptor.proto";
extend google.protobuf.MessageOptions { Rule rule = 50002; }
message Rule {
  int32 min = 1;
  double ratio = 2;
  repeated string tags = 3;
  Sub sub = 4;
}
message Sub { int32 a = 1; int32 b = 2; }
message M {
  option (rule).min = 1;
  option (rule).ratio = 1.23456;
  option (rule).sub.b = 2;
  option (rule).tags = "x";
  option (rule).sub.a = 1;
  option (rule).tags = "y";
  int32 a = 1;
}
"""
    parsed, printed = protobuf.parse(text)
    assert (
        "  option (rule).min = 1;\n  option (rule).ratio = 1.23456;\n  option (rule).sub.b = 2;\n"
        '  option (rule).tags = "x";\n  option (rule).sub.a = 1;\n  option (rule).tags = "y";\n'
    ) in printed
    normalized = parsed.normalized()
    # resolved to the extension's full name, the settings of the non-repeated option merged into
    # one message value (a singular submessage's deep, a repeated field's into a list), keys
    # sorted, numbers printed as Java's DecimalFormat prints them
    assert (
        "  option (p.rule) = {\n"
        "    min: 1,\n"
        "    ratio: 1.235,\n"
        "    sub: {\n"
        "      a: 1,\n"
        "      b: 2\n"
        "    },\n"
        "    tags: [\n"
        '      "x",\n'
        '      "y"\n'
        "    ]\n"
        "  };\n"
    ) in normalized, normalized


def test_number_literals_are_printed_as_written_and_normalized_as_java_formats_them():
    text = """syntax = "proto2";
package q;
option (hex) = 0x10;
option (quoted) = "0x10";
option (exponent) = 1e3;
option (trailing) = 1.50;
option (octal) = -010;
option (single) = 1.2345;
option (tiny) = -0.0001;
option (values) = { x: 0x1F y: [1.50, 2] };
message M {
  optional int32 a = 1 [default = 0x10];
  optional double d = 2 [default = 1.50];
  optional float f = 3 [default = -inf];
}
"""
    parsed, printed = protobuf.parse(text)
    assert printed == (
        'syntax = "proto2";\n'
        "package q;\n"
        "\n"
        "option (hex) = 0x10;\n"
        'option (quoted) = "0x10";\n'
        "option (exponent) = 1e3;\n"
        "option (trailing) = 1.50;\n"
        "option (octal) = -010;\n"
        "option (single) = 1.2345;\n"
        "option (tiny) = -0.0001;\n"
        "option (values) = {\n"
        "  x: 0x1F,\n"
        "  y: [\n"
        "    1.50,\n"
        "    2\n"
        "  ]\n"
        "};\n"
        "\n"
        "message M {\n"
        "  optional int32 a = 1 [default = 0x10];\n"
        "  optional double d = 2 [default = 1.50];\n"
        "  optional float f = 3 [default = -inf];\n"
        "}\n"
    )
    # the descriptor has protoc's values
    assert [f.default_value for f in parsed.file.message_type[0].field] == ["16", "1.5", "-inf"]
    # normalized: sorted by name; 1.2345 read as a float (7 or fewer decimals), so 1.235
    assert parsed.normalized() == (
        "package q;\n"
        "\n"
        "option (exponent) = 1000;\n"
        "option (hex) = 16;\n"
        "option (octal) = -8;\n"
        'option (quoted) = "0x10";\n'
        "option (single) = 1.235;\n"
        "option (tiny) = -0;\n"
        "option (trailing) = 1.5;\n"
        "option (values) = {\n"
        "  x: 31,\n"
        "  y: [\n"
        "    1.5,\n"
        "    2\n"
        "  ]\n"
        "};\n"
        "\n"
        "message M {\n"
        "  optional int32 a = 1 [default = 16];\n"
        "  optional double d = 2 [default = 1.5];\n"
        "  optional float f = 3 [default = -inf];\n"
        "}\n"
    )


def meta_bytes(**values) -> bytes:
    """A confluent.Meta message's bytes, from a class of strom's own meta.proto (the broker knows
    no confluent-kafka module declaring it, so the option reaches it as an unknown field)."""
    meta = protobuf.parse(protobuf_confluent.TEXTS[protobuf_confluent.META])[0].file
    meta.name = protobuf_confluent.META
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(protobuf.WELL_KNOWN["google/protobuf/descriptor.proto"].serialized_pb)
    pool.Add(meta)
    return GetMessageClass(pool.FindMessageTypeByName("confluent.Meta"))(**values).SerializeToString()


def with_meta(options_class, data: bytes, **standard):
    """Options carrying confluent.*_meta (extension 1088) as a protoc-made descriptor does."""
    tag = bytes([0x82, 0x44])  # field 1088, length-delimited
    return options_class.FromString(options_class(**standard).SerializeToString() + tag + bytes([len(data)]) + data)


def test_a_descriptor_keeps_confluents_own_meta_options_and_drops_other_custom_ones():
    file = FDP(name="pii.proto", package="shop", syntax="proto3", dependency=["confluent/meta.proto"])
    file.options.CopyFrom(with_meta(descriptor_pb2.FileOptions, meta_bytes(doc="orders"), java_package="com.shop"))
    order = file.message_type.add(name="Order")
    order.options.CopyFrom(with_meta(descriptor_pb2.MessageOptions, meta_bytes(tags=["PUBLIC"])))
    email = order.field.add(name="email", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="email")
    email.options.CopyFrom(
        with_meta(
            descriptor_pb2.FieldOptions,
            meta_bytes(doc="who", tags=["PII"], params={"scale": "2"}),
            deprecated=True,
        )
    )
    # another custom option (field 50001): an unknown field to Confluent too, so left out
    custom = descriptor_pb2.FieldOptions.FromString(b"\x8a\xb5\x18\x03pii")
    order.field.add(name="note", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING).options.CopyFrom(custom)
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="A", number=0).options.CopyFrom(
        with_meta(descriptor_pb2.EnumValueOptions, meta_bytes(tags=["X"]))
    )
    parsed, text = protobuf.parse(encoded(file))
    assert text == (
        'syntax = "proto3";\n'
        "package shop;\n"
        "\n"
        'import "confluent/meta.proto";\n'
        "\n"
        'option java_package = "com.shop";\n'
        "option (confluent.file_meta) = {\n"
        '  doc: "orders"\n'
        "};\n"
        "\n"
        "message Order {\n"
        "  option (confluent.message_meta) = {\n"
        "    tags: [\n"
        '      "PUBLIC"\n'
        "    ]\n"
        "  };\n"
        "\n"
        "  string email = 1 [\n"
        "    deprecated = true,\n"
        "    (confluent.field_meta) = {\n"
        '      doc: "who",\n'
        "      params: [\n"
        "        {\n"
        '          value: "2",\n'
        '          key: "scale"\n'
        "        }\n"
        "      ],\n"
        "      tags: [\n"
        '        "PII"\n'
        "      ]\n"
        "    },\n"
        '    json_name = "email"\n'
        "  ];\n"
        "  string note = 2;\n"
        "}\n"
        "enum Kind {\n"
        "  A = 0 [(confluent.enum_value_meta) = {\n"
        "    tags: [\n"
        '      "X"\n'
        "    ]\n"
        "  }];\n"
        "}\n"
    )
    assert protobuf.parse(text)[1] == text  # Confluent's meta.proto is imported without a reference
    # normalized: keys sorted, one-element lists unwrapped
    assert '    (confluent.field_meta) = {\n      doc: "who",\n      params: {\n        key: "scale",\n' in (
        parsed.normalized()
    )


def test_ignore_extensions_leaves_out_custom_options_and_extensions():
    """format=ignore_extensions: Confluent's printer without custom options (its own kept),
    extension ranges and extend blocks."""
    parsed, _ = protobuf.parse(
        EVERY_KIND.replace(
            'option java_package = "com.example.shop";',
            'option java_package = "com.example.shop";\noption (confluent.file_meta) = { doc: "kept" };',
        ).replace(
            'import "google/protobuf/descriptor.proto";',
            'import "google/protobuf/descriptor.proto";\nimport "confluent/meta.proto";',
        )
    )
    text = parsed.without_extensions()
    assert text.startswith(
        'syntax = "proto2";\n'
        "package shop;\n"
        "\n"
        'import "google/protobuf/descriptor.proto";\n'
        'import "confluent/meta.proto";\n'
        "\n"
        'option java_package = "com.example.shop";\n'
        "option (confluent.file_meta) = {\n"
        '  doc: "kept"\n'
        "};\n"
        "option optimize_for = SPEED;\n"
        "\n"
        "message Order {\n"
    ), text
    assert '  required string id = 1 [json_name = "orderId"];\n' in text
    assert "    string cash = 7;\n" in text
    assert "extensions" not in text and "extend" not in text and "sensitive" not in text and "file_tags" not in text
    assert text.endswith(
        "service Shop {\n  rpc Get (Order) returns (stream Order.Line) {\n    option deprecated = true;\n  };\n}\n"
    )


def test_confluents_meta_options_written_in_text_reach_its_descriptor():
    text = """syntax = "proto3";
package s;
import "confluent/meta.proto";
option (confluent.file_meta) = { doc: "f" };
message M {
  string a = 1 [(confluent.field_meta) = { tags: ["PII", "X"] params: { key: "k" value: "v" } rules: { name: "r" } }];
  string b = 2 [(other.option) = true];
}
"""
    parsed, _ = protobuf.parse(text)
    described, described_text = protobuf.parse(parsed.serialized())
    assert (
        "  string a = 1 [(confluent.field_meta) = {\n"
        "    params: [\n"
        "      {\n"
        '        key: "k",\n'
        '        value: "v"\n'
        "      }\n"
        "    ],\n"
        "    tags: [\n"
        '      "PII",\n'
        '      "X"\n'
        "    ],\n"
        "    rules: [\n"
        "      {\n"
        '        name: "r"\n'
        "      }\n"
        "    ]\n"
        "  }];\n"
        "  string b = 2;\n"
    ) in described_text
    assert 'option (confluent.file_meta) = {\n  doc: "f"\n};\n' in described_text
    # normalized, the text and its descriptor differ only by the option Confluent drops
    assert described.normalized() == parsed.normalized().replace(" [(other.option) = true]", "")
