"""Protobuf schemas (strom.schemas.protobuf): .proto text and base64 descriptors to one canonical
text, what protoc would refuse refused, and Confluent's Protobuf compatibility rules."""

import base64

import pytest
from google.protobuf import descriptor_pb2, timestamp_pb2

from strom.schemas import protobuf

BASE = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  repeated Line lines = 3;
  map<string, int32> counts = 4;
  oneof payment { string card = 5; string cash = 6; }
  optional Status status = 7;
  google.protobuf.Timestamp at = 8;
  reserved 20 to 22, 30;
  reserved "old";
  message Line { string sku = 1; uint32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""


def parsed(text, referenced=()):
    return protobuf.parse(text, referenced)[0]


def problems(level, new, *previous):
    return protobuf.compatibility_problems(level, parsed(new), [parsed(p) for p in previous])


def test_text_is_kept_as_written_and_a_descriptor_is_the_same_schema():
    first, canonical = protobuf.parse(BASE)
    assert protobuf.parse(canonical)[1] == canonical  # a fixed point
    assert "repeated Line lines = 3;" in canonical and "optional Status status = 7;" in canonical  # as written
    assert "map<string, int32> counts = 4;" in canonical and "reserved 20 to 22, 30;" in canonical
    # the base64 descriptor of it: rendered with fully qualified names, the same schema
    described, rendered = protobuf.parse(first.serialized())
    assert "optional .shop.Order.Status status = 7;" in rendered and "oneof payment {" in rendered
    assert protobuf.parse(rendered)[1] == rendered and described.same(first) and first.same(described)
    assert first.identity == described.identity == protobuf.parse(rendered)[0].identity
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(first.serialized()))
    order = file.message_type[0]
    assert [f.number for f in order.field] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [o.name for o in order.oneof_decl] == ["payment", "_status"]  # proto3 optional: synthetic, last
    assert [(n.name, n.options.map_entry) for n in order.nested_type] == [("CountsEntry", True), ("Line", False)]
    assert list(file.dependency) == ["google/protobuf/timestamp.proto"]


def test_a_well_known_types_own_descriptor_is_accepted():
    text = base64.b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode()
    assert "message Timestamp {" in protobuf.parse(text)[1]
    assert protobuf.record_name(protobuf.parse(text)[1]) == "google.protobuf.Timestamp"


def test_references_resolve_imports():
    common = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    text = 'syntax = "proto3";\nimport "common.proto";\nmessage Price { common.Money amount = 1; }\n'
    price, canonical = protobuf.parse(text, [("common.proto", common)])
    assert "common.Money amount = 1;" in canonical and ".common.Money amount = 1;" in price.identity
    with pytest.raises(protobuf.InvalidSchemaError, match="common.proto"):
        protobuf.parse(text)


@pytest.mark.parametrize(
    "bad",
    [
        "message { nope",
        'syntax = "proto3"; message A { Missing m = 1; }',
        'syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }',
        'syntax = "proto3"; message A { map<double, int32> m = 1; }',
        'syntax = "proto3"; enum E { A = 0; B = 0; }',
        "",
        "bm90IGEgZGVzY3JpcHRvcg==",
        'edition = "2023"; message A { int32 a = 1; }',
    ],
)
def test_what_protoc_refuses_is_refused(bad):
    with pytest.raises(protobuf.InvalidSchemaError):
        protobuf.parse(bad)


def message(*fields, extra=""):
    return 'syntax = "proto3";\npackage p;\nmessage M {\n' + "\n".join(fields) + "\n}\n" + extra


# (previous, new, compatible, the difference named): Confluent's Protobuf rules, checked BACKWARD
CASES = [
    (message("string a = 1;"), message("string a = 1;", "int32 b = 2;"), True, None),  # field added
    (message("string a = 1;", "int32 b = 2;"), message("string a = 1;"), True, None),  # field removed
    (message("string a = 1;"), message("string renamed = 1;"), True, None),  # renamed: the number counts
    (message("int32 a = 1;"), message("int64 a = 1;"), True, None),  # same wire group
    (message("string a = 1;"), message("bytes a = 1;"), True, None),
    (message("int32 a = 1;"), message("string a = 1;"), False, "FIELD_SCALAR_KIND_CHANGED"),
    (message("sint32 a = 1;"), message("int32 a = 1;"), False, "FIELD_SCALAR_KIND_CHANGED"),
    (message("string a = 1;"), message("N a = 1;", "message N { int32 x = 1; }"), False, "FIELD_KIND_CHANGED"),
    (
        message("N a = 1;", "message N { int32 x = 1; }", "message O { int32 x = 1; }"),
        message("O a = 1;", "message N { int32 x = 1; }", "message O { int32 x = 1; }"),
        False,
        "FIELD_NAMED_TYPE_CHANGED",
    ),
    # singular and repeated: fine for string, bytes and messages, not for numbers (packed)
    (message("string a = 1;"), message("repeated string a = 1;"), True, None),
    (message("optional bytes a = 1;"), message("repeated bytes a = 1;"), True, None),
    (
        message("N a = 1;", "message N { int32 x = 1; }"),
        message("repeated N a = 1;", "message N { int32 x = 1; }"),
        True,
        None,
    ),
    (message("int32 a = 1;"), message("repeated int32 a = 1;"), False, "FIELD_NUMERIC_LABEL_CHANGED"),
    # an enum is a varint on the wire: read as int32 and the other way round
    (message("int32 a = 1;"), message("E a = 1;", "enum E { X = 0; }"), True, None),
    (message("E a = 1;", "enum E { X = 0; }"), message("int64 a = 1;"), True, None),
    (message("E a = 1;", "enum E { X = 0; }"), message("string a = 1;"), False, "FIELD_KIND_CHANGED"),
    # a field number reused for another field of the same type is a rename; renumbered is removed + added
    (message("string a = 1;"), message("string a = 2;"), True, None),
    # messages matched by name, wherever they are declared
    (
        message("string a = 1;", extra="message Z { int32 x = 1; }\n"),
        message("string a = 1;").replace("message M {", "message Z { int32 x = 1; }\nmessage M {"),
        True,
        None,
    ),
    (message("string a = 1;"), message("string a = 1;"), True, None),
    (
        message("string a = 1;", extra="message Gone { int32 x = 1; }\n"),
        message("string a = 1;"),
        False,
        "MESSAGE_REMOVED",
    ),
    (message("string a = 1;"), message("string a = 1;", extra="message Added { int32 x = 1; }\n"), True, None),
    (message("string a = 1;"), message("string a = 1;").replace("package p;", "package q;"), False, "PACKAGE_CHANGED"),
    (message("E e = 1;", "enum E { A = 0; }"), message("E e = 1;", "enum E { A = 0; B = 1; }"), True, None),
    (
        message("string a = 1;", "string b = 2;"),
        message("oneof o { string a = 1; string b = 2; }"),
        False,
        "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
    ),
    (message("string a = 1;"), message("oneof o { string a = 1; }"), True, None),  # one field into a new oneof
    # ... with a new field beside it
    (message("string a = 1;"), message("oneof o { string a = 1; int32 n = 9; }"), True, None),
    (message("oneof o { string a = 1; }"), message("oneof o { string a = 1; int32 n = 2; }"), True, None),
    (
        message("oneof o { string a = 1; int32 n = 2; }"),
        message("oneof o { string a = 1; }"),
        False,
        "ONEOF_FIELD_REMOVED",
    ),
    (
        message("string a = 1;", "oneof o { string b = 2; string c = 3; }"),
        message("oneof renamed { string a = 1; string b = 2; string c = 3; }"),
        False,
        "FIELD_MOVED_TO_EXISTING_ONEOF",
    ),
    (
        message("string a = 1;", "oneof o { string b = 2; }"),
        message("oneof o { string a = 1; string b = 2; }"),
        False,
        "FIELD_MOVED_TO_EXISTING_ONEOF",
    ),
    (
        message("map<string, N> m = 2;", "message N { int32 x = 1; }"),
        message("map<string, M.N> m = 2;", "message N { int32 x = 1; }"),
        True,
        None,
    ),
    (
        message("string a = 1;", "map<string, int32> m = 2;"),
        message("string a = 1;", "map<string, string> m = 2;"),
        False,
        "FIELD_NAMED_TYPE_CHANGED",
    ),
]


@pytest.mark.parametrize(("previous", "new", "compatible", "named"), CASES)
def test_confluent_rules(previous, new, compatible, named):
    found = problems("BACKWARD", new, previous)
    assert (not found) == compatible, found
    if named is not None:
        assert any(named in p for p in found), found


def test_required_fields_in_proto2():
    old = 'syntax = "proto2";\nmessage M { required string a = 1; }\n'
    added = 'syntax = "proto2";\nmessage M { required string a = 1; required int32 b = 2; }\n'
    removed = 'syntax = "proto2";\nmessage M { optional int32 c = 3; }\n'
    assert any("REQUIRED_FIELD_ADDED" in p for p in problems("BACKWARD", added, old))
    assert any("REQUIRED_FIELD_REMOVED" in p for p in problems("BACKWARD", removed, old))
    assert "required string a = 1;" in protobuf.parse(old)[1]
    defaulted = (
        'syntax = "proto2";\nmessage M { optional string a = 1 [default = "x"]; optional int32 n = 2 [default = 7]; }\n'
    )
    canonical = protobuf.parse(defaulted)[1]
    assert 'optional string a = 1 [default = "x"];' in canonical and protobuf.parse(canonical)[1] == canonical


def test_levels_and_transitivity():
    v1 = message("int32 a = 1;")
    v2 = message("int32 a = 1;", "string b = 2;")
    v3 = message("int32 a = 1;", "int64 b = 2;")  # b's number reused with another type: v2 cannot read it
    assert not problems("FULL", v2, v1)
    assert not problems("BACKWARD", v3, v1) and problems("BACKWARD_TRANSITIVE", v3, v1, v2)
    assert problems("FORWARD", v3, v2) and not problems("NONE", v3, v2)


COMMENTED = """// the shop's orders
syntax = "proto3";
package shop;
option java_package = "com.example.shop";  // for the Java client
option go_package = "example.com/shop";
import "google/protobuf/timestamp.proto";

/* an order */
message Order {
  string id = 1 [json_name = "orderId", deprecated = true];
  message Line { string sku = 1; }
  map<string, Line> by_sku = 2 [deprecated = true];
  repeated Line lines = 3;
  google.protobuf.Timestamp at = 4;
  option (my.ext) = true;
}
enum Kind { A = 0; B = 1 [deprecated = true]; }
"""


def test_options_and_names_are_kept_and_layout_and_comments_are_not():
    """Confluent's registry stores its printer's rendering of the parsed file (comments and layout
    dropped, everything else as written, laid out as its printer lays it out): so does strom."""
    parsed_first, canonical = protobuf.parse(COMMENTED)
    assert canonical == (
        'syntax = "proto3";\n'
        "package shop;\n"
        "\n"
        'import "google/protobuf/timestamp.proto";\n'
        "\n"
        'option java_package = "com.example.shop";\n'
        'option go_package = "example.com/shop";\n'
        "\n"
        "message Order {\n"
        "  option (my.ext) = true;\n"
        "\n"
        "  string id = 1 [\n"
        "    deprecated = true,\n"
        '    json_name = "orderId"\n'
        "  ];\n"
        "  map<string, Line> by_sku = 2 [deprecated = true];\n"
        "  repeated Line lines = 3;\n"
        "  google.protobuf.Timestamp at = 4;\n"
        "\n"
        "  message Line {\n"
        "    string sku = 1;\n"
        "  }\n"
        "}\n"
        "enum Kind {\n"
        "  A = 0;\n"
        "  B = 1 [deprecated = true];\n"
        "}\n"
    )
    assert protobuf.parse(canonical)[1] == canonical
    relaid = "\n".join(line.split("//")[0].strip() for line in COMMENTED.splitlines()).replace("/* an order */", "")
    again, same_text = protobuf.parse("  " + relaid.replace(" = ", "=") + "\n\n")
    assert same_text == canonical and again.same(parsed_first)
    # another option value: another schema, though the descriptors' renderings are one
    other, other_text = protobuf.parse(COMMENTED.replace('go_package = "example.com/shop"', 'go_package = "x/shop"'))
    assert other_text != canonical and other.identity == parsed_first.identity and not other.same(parsed_first)
    # the descriptor (options beyond default, packed and allow_alias not compared) is the same schema
    assert protobuf.parse(parsed_first.serialized())[0].same(parsed_first)


@pytest.mark.parametrize(
    "text, kept",
    [
        (
            'syntax = "proto3";\nenum K { option (x.y) = { a: 1 b: 2 }; A = 0 [(v) = { q: "z" }]; reserved 3 to 4; }\n'
            "message M { K k = 1; }\n",
            [
                '  A = 0 [(v) = {\n    q: "z"\n  }];',
                "  option (x.y) = {\n    a: 1,\n    b: 2\n  };",
                "reserved 3 to 4;",
            ],
        ),
        (
            'syntax = "proto3";\noption optimize_for = SPEED;\nmessage M { map<string, M> m = 1 [deprecated = true]; }\n'
            "service S { rpc Get (M) returns (stream M); }\n",
            [
                "option optimize_for = SPEED;",
                "map<string, M> m = 1 [deprecated = true];",
                "  rpc Get (M) returns (stream M);",
            ],
        ),
    ],
)
def test_the_printed_text_is_a_fixed_point_and_keeps_what_was_written(text, kept):
    canonical = protobuf.parse(text)[1]
    assert protobuf.parse(canonical)[1] == canonical
    assert all(part in canonical for part in kept), canonical
