"""JSON Schema compatibility (strom.schemas.json_schema, its rules in .json_schema_compatibility),
against the cases Confluent's documentation of JSON Schema compatibility gives: content models,
types, required properties, enums and bounds, per level and transitively."""

import json
import random

import pytest

from strom.schemas import json_schema, json_schema_compatibility


def obj(properties, required=(), closed=False, **extra):
    schema = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return json.dumps(schema)


def problems(level, new, *previous):
    parsed = [json_schema.parse(p)[0] for p in previous]
    return json_schema.compatibility_problems(level, json_schema.parse(new)[0], parsed)


STRING = {"type": "string"}
INT = {"type": "integer"}
NUMBER = {"type": "number"}

# (level, previous, new, compatible, the difference named when not)
CASES = [
    # a property added: fine to a closed model, not to an open one (old documents may hold it)
    ("BACKWARD", obj({"a": STRING}, closed=True), obj({"a": STRING, "b": INT}, closed=True), True, None),
    ("BACKWARD", obj({"a": STRING}), obj({"a": STRING, "b": INT}), False, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    # ... unless the writer's partially open model (additionalProperties: schema) is read by it
    ("BACKWARD", obj({"a": STRING}, additionalProperties=INT), obj({"a": STRING, "b": NUMBER}), True, None),
    # a property removed: fine from an open model, not from a closed one
    ("BACKWARD", obj({"a": STRING, "b": INT}), obj({"a": STRING}), True, None),
    (
        "BACKWARD",
        obj({"a": STRING, "b": INT}, closed=True),
        obj({"a": STRING}, closed=True),
        False,
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    # closing an open model
    ("BACKWARD", obj({"a": STRING}), obj({"a": STRING}, closed=True), False, "ADDITIONAL_PROPERTIES_REMOVED"),
    ("BACKWARD", obj({"a": STRING}, closed=True), obj({"a": STRING}), True, None),
    # types: widened is fine, narrowed or changed is not
    ("BACKWARD", obj({"a": INT}), obj({"a": NUMBER}), True, None),
    ("BACKWARD", obj({"a": NUMBER}), obj({"a": INT}), False, "TYPE_NARROWED"),
    ("BACKWARD", obj({"a": {"type": ["string", "null"]}}), obj({"a": STRING}), False, "TYPE_NARROWED"),
    ("BACKWARD", obj({"a": STRING}), obj({"a": INT}), False, "TYPE_CHANGED"),
    # required: added is refused, with a default it is fine; removed is fine
    ("BACKWARD", obj({"a": STRING, "b": INT}), obj({"a": STRING, "b": INT}, ["b"]), False, "REQUIRED_ATTRIBUTE_ADDED"),
    ("BACKWARD", obj({"a": STRING, "b": INT}), obj({"a": STRING, "b": {**INT, "default": 0}}, ["b"]), True, None),
    ("BACKWARD", obj({"a": STRING}, ["a"]), obj({"a": STRING}), True, None),
    # enums: values added are fine, removed are not
    ("BACKWARD", obj({"e": {"enum": ["x", "y"]}}), obj({"e": {"enum": ["x", "y", "z"]}}), True, None),
    ("BACKWARD", obj({"e": {"enum": ["x", "y"]}}), obj({"e": {"enum": ["x"]}}), False, "ENUM_ARRAY_NARROWED"),
    # bounds: relaxed is fine, tightened or added is not
    ("BACKWARD", obj({"s": {**STRING, "maxLength": 5}}), obj({"s": {**STRING, "maxLength": 10}}), True, None),
    ("BACKWARD", obj({"s": {**STRING, "maxLength": 10}}), obj({"s": {**STRING, "maxLength": 5}}), False, "maxLength"),
    ("BACKWARD", obj({"n": INT}), obj({"n": {**INT, "minimum": 0}}), False, "minimum"),
    ("BACKWARD", obj({"s": STRING}), obj({"s": {**STRING, "pattern": "^a"}}), False, "pattern"),
    # arrays by their items; anyOf branches added are fine, removed are not
    (
        "BACKWARD",
        obj({"l": {"type": "array", "items": INT}}),
        obj({"l": {"type": "array", "items": NUMBER}}),
        True,
        None,
    ),
    ("BACKWARD", obj({"u": {"anyOf": [STRING, INT]}}), obj({"u": {"anyOf": [STRING, INT, NUMBER]}}), True, None),
    ("BACKWARD", obj({"u": {"anyOf": [STRING, INT]}}), obj({"u": {"anyOf": [STRING]}}), False, "anyOf"),
    # multipleOf: a step dividing the old one is fine; uniqueItems and dependentRequired added are not
    ("BACKWARD", obj({"n": {**INT, "multipleOf": 4}}), obj({"n": {**INT, "multipleOf": 2}}), True, None),
    ("BACKWARD", obj({"n": {**INT, "multipleOf": 2}}), obj({"n": {**INT, "multipleOf": 4}}), False, "multipleOf"),
    (
        "BACKWARD",
        obj({"l": {"type": "array"}}),
        obj({"l": {"type": "array", "uniqueItems": True}}),
        False,
        "uniqueItems",
    ),
    ("BACKWARD", obj({"a": STRING}), obj({"a": STRING}, dependentRequired={"a": ["b"]}), False, "dependentRequired"),
    # tuples position by position, draft 2020-12's prefixItems and draft 7's list items
    (
        "BACKWARD",
        obj({"t": {"type": "array", "prefixItems": [INT, STRING]}}),
        obj({"t": {"type": "array", "prefixItems": [NUMBER, STRING]}}),
        True,
        None,
    ),
    (
        "BACKWARD",
        obj({"t": {"type": "array", "items": [NUMBER, STRING]}}),
        obj({"t": {"type": "array", "items": [INT, STRING]}}),
        False,
        "items/0",
    ),
    # patternProperties read a property the closed model no longer names; a property that accepts
    # anything may be added to an open model; one the writer had false may go
    (
        "BACKWARD",
        obj({"a": STRING, "n_1": INT}, closed=True),
        obj({"a": STRING}, closed=True, patternProperties={"^n_": NUMBER}),
        True,
        None,
    ),
    (
        "BACKWARD",
        obj({"a": STRING, "n_1": NUMBER}, closed=True),
        obj({"a": STRING}, closed=True, patternProperties={"^n_": INT}),
        False,
        "TYPE_NARROWED",
    ),
    ("BACKWARD", obj({"a": STRING}), obj({"a": STRING, "any": {}}), True, None),
    ("BACKWARD", obj({"a": STRING, "gone": False}, closed=True), obj({"a": STRING}, closed=True), True, None),
    # required names that are no property of the reader's are not counted (as Confluent)
    ("BACKWARD", obj({"a": STRING}, ["a"]), obj({"a": STRING}, ["b"]), True, None),
    # not: refusing more is a problem, refusing less is fine
    ("BACKWARD", json.dumps({"not": NUMBER}), json.dumps({"not": INT}), True, None),
    ("BACKWARD", json.dumps({"not": INT}), json.dumps({"not": NUMBER}), False, "NOT_TYPE_NARROWED"),
    ("BACKWARD", json.dumps({}), json.dumps({"not": INT}), False, "NOT_TYPE_ADDED"),
    # allOf against the writer's allOf branches and a writer's single oneOf branch
    (
        "BACKWARD",
        json.dumps({"allOf": [STRING, {"enum": ["r"]}]}),
        json.dumps({"allOf": [{"enum": ["r", "b"]}, STRING]}),
        True,
        None,
    ),
    ("BACKWARD", json.dumps({"oneOf": [STRING]}), json.dumps({"allOf": [STRING]}), True, None),
    # additionalItems compared as they are; dependentSchemas added or changed
    (
        "BACKWARD",
        json.dumps({"additionalItems": True}),
        json.dumps({"additionalItems": False}),
        False,
        "additionalItems",
    ),
    (
        "BACKWARD",
        json.dumps({"dependentSchemas": {"a": STRING}}),
        json.dumps({"dependentSchemas": {"a": NUMBER}}),
        False,
        "dependentSchemas",
    ),
    # FORWARD is BACKWARD turned round; FULL is both
    ("FORWARD", obj({"a": STRING, "b": INT}), obj({"a": STRING}), False, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    ("FORWARD", obj({"a": NUMBER}), obj({"a": INT}), True, None),
    ("FULL", obj({"a": INT}), obj({"a": NUMBER}), False, "TYPE_NARROWED"),
    ("FULL", obj({"a": STRING}, closed=True), obj({"a": STRING, "b": INT}, closed=True), False, "CLOSED"),
    ("NONE", obj({"a": STRING}), obj({"a": INT}), True, None),
]


@pytest.mark.parametrize(("level", "previous", "new", "compatible", "named"), CASES)
def test_confluent_cases(level, previous, new, compatible, named):
    found = problems(level, new, previous)
    assert (not found) == compatible, found
    if named is not None:
        assert any(named in p for p in found), found


def test_transitive_levels_check_every_live_version():
    v1 = obj({"a": INT}, closed=True)
    v2 = obj({"a": NUMBER}, closed=True)
    v3 = obj({"a": INT, "b": STRING}, closed=True)  # reads v1's data, not v2's (number narrowed)
    assert problems("BACKWARD", v3, v2) and not problems("BACKWARD", v3, v1)
    assert problems("BACKWARD_TRANSITIVE", v3, v1, v2)
    assert not problems("BACKWARD", v2, v2, v1) and not problems("BACKWARD_TRANSITIVE", v2, v1, v2)


def test_local_refs_are_followed_and_recursion_ends():
    tree = {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
            }
        },
        "$ref": "#/definitions/node",
    }
    wider = json.loads(json.dumps(tree))
    wider["definitions"]["node"]["properties"]["v"] = NUMBER
    assert not problems("BACKWARD", json.dumps(wider), json.dumps(tree))
    assert any("TYPE_NARROWED" in p for p in problems("BACKWARD", json.dumps(tree), json.dumps(wider)))


def test_parse_checks_the_metaschema_and_keeps_a_canonical_text():
    parsed, canonical = json_schema.parse('{ "type" : "object",\n "properties": {"a": {"type": "string"}} }')
    assert canonical == '{"type":"object","properties":{"a":{"type":"string"}}}'
    assert json_schema.normalized('{"type":"object","properties":{}}') == '{"properties":{},"type":"object"}'
    assert json_schema.parse("true")[1] == "true"
    for bad in ('{"type": 5}', '{"minLength": -1}', "[]", "12", "{nope", '{"$schema": 3}'):
        with pytest.raises(json_schema.InvalidSchemaError):
            json_schema.parse(bad)
    assert json_schema.record_name('{"title": "Order", "type": "object"}') == "Order"
    assert json_schema.record_name('{"type": "object"}') is None


def test_refs_to_referenced_documents_are_followed():
    """A $ref to another document leads into the schema the reference of that name holds (by its
    name or the name's last segment), its own local refs resolving in it."""
    address_v1 = json.dumps(
        {"definitions": {"zip": INT}, "type": "object", "properties": {"zip": {"$ref": "#/definitions/zip"}}}
    )
    address_v2 = json.dumps(
        {"definitions": {"zip": STRING}, "type": "object", "properties": {"zip": {"$ref": "#/definitions/zip"}}}
    )
    order = json.dumps({"type": "object", "properties": {"ship_to": {"$ref": "address.json"}}})

    def parsed(address):
        return json_schema.parse(order, [("schemas/address.json", address)])[0]

    found = json_schema.compatibility_problems("BACKWARD", parsed(address_v2), [parsed(address_v1)])
    assert any("ship_to" in p and "TYPE_CHANGED" in p for p in found), found
    assert not json_schema.compatibility_problems("BACKWARD", parsed(address_v1), [parsed(address_v1)])
    unknown = json_schema.parse(json.dumps({"properties": {"x": {"$ref": "nowhere.json"}}}))[0]
    assert not json_schema.compatibility_problems("BACKWARD", unknown, [parsed(address_v1)])


# format: checked as pattern is (Confluent's diff compares neither format nor if/then/else; a
# reader that asserts a format refuses strings the writer accepted). if/then/else: a writer document
# must pass the reader's branch its condition picks.
KIND_A = {"properties": {"kind": {"const": "a"}}}
KIND_B = {"properties": {"kind": {"const": "b"}}}
PARENT = {"kind": STRING, "x": STRING, "y": NUMBER}

CONDITIONAL_AND_FORMAT_CASES = [
    # format added or changed narrows what the reader takes; removed or kept is fine
    ("BACKWARD", obj({"d": STRING}), obj({"d": {**STRING, "format": "date"}}), False, "FORMAT_ADDED"),
    ("BACKWARD", obj({"d": {**STRING, "format": "date"}}), obj({"d": STRING}), True, None),
    (
        "BACKWARD",
        obj({"d": {**STRING, "format": "date"}}),
        obj({"d": {**STRING, "format": "email"}}),
        False,
        "FORMAT_CHANGED",
    ),
    ("BACKWARD", obj({"d": {**STRING, "format": "date"}}), obj({"d": {**STRING, "format": "date"}}), True, None),
    ("FORWARD", obj({"d": STRING}), obj({"d": {**STRING, "format": "date"}}), True, None),
    ("FORWARD", obj({"d": {**STRING, "format": "date"}}), obj({"d": STRING}), False, "FORMAT_ADDED"),
    # a conditional added: its then requiring a property the writer left optional refuses documents
    (
        "BACKWARD",
        obj(PARENT),
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        False,
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
    ("BACKWARD", obj(PARENT), obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}), False, "CONDITIONAL_ADDED"),
    # ... unless the property has a default, or the writer required it already
    (
        "BACKWARD",
        obj(PARENT),
        obj({**PARENT, "x": {**STRING, "default": "-"}}, **{"if": KIND_A, "then": {"required": ["x"]}}),
        True,
        None,
    ),
    ("BACKWARD", obj(PARENT, ["x"]), obj(PARENT, ["x"], **{"if": KIND_A, "then": {"required": ["x"]}}), True, None),
    # a branch that reads every writer document is fine; one that narrows a type is not
    ("BACKWARD", obj({"y": INT}), obj({"y": INT}, **{"if": KIND_A, "then": {"properties": {"y": NUMBER}}}), True, None),
    (
        "BACKWARD",
        obj(PARENT),
        obj(PARENT, **{"if": KIND_A, "else": {"properties": {"y": INT}}}),
        False,
        "/else: CONDITIONAL_ADDED_OR_CHANGED",
    ),
    # a conditional removed widens the reader
    ("BACKWARD", obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}), obj(PARENT), True, None),
    # the same condition: the reader's branch may read the writer's branch
    (
        "BACKWARD",
        obj(PARENT, **{"if": KIND_A, "then": {"properties": {"y": INT}}}),
        obj(PARENT, **{"if": KIND_A, "then": {"properties": {"y": NUMBER}}}),
        True,
        None,
    ),
    (
        "BACKWARD",
        obj(PARENT, **{"if": KIND_A, "then": {"properties": {"y": NUMBER}}}),
        obj(PARENT, **{"if": KIND_A, "then": {"properties": {"y": INT}}}),
        False,
        "CONDITIONAL_BRANCH_NARROWED",
    ),
    (
        "BACKWARD",
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        True,
        None,
    ),
    (
        "BACKWARD",
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x", "y"]}}),
        False,
        "then/required/y: REQUIRED_ATTRIBUTE_ADDED",
    ),
    # another condition: the writer's documents may fall on either side of it
    (
        "BACKWARD",
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        obj(PARENT, **{"if": KIND_B, "then": {"required": ["x"]}}),
        False,
        "CONDITIONAL_ADDED_OR_CHANGED",
    ),
    # then/else without if, and if alone, constrain nothing
    ("BACKWARD", obj(PARENT), obj(PARENT, then={"required": ["x"]}, **{"else": {"required": ["y"]}}), True, None),
    ("BACKWARD", obj(PARENT), obj(PARENT, **{"if": KIND_A}), True, None),
    # FULL: a conditional added is fine to FORWARD (the old reader ignores it), not to BACKWARD
    ("FORWARD", obj(PARENT), obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}), True, None),
    (
        "FULL",
        obj(PARENT),
        obj(PARENT, **{"if": KIND_A, "then": {"required": ["x"]}}),
        False,
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
]


@pytest.mark.parametrize(("level", "previous", "new", "compatible", "named"), CONDITIONAL_AND_FORMAT_CASES)
def test_format_and_conditional_rules(level, previous, new, compatible, named):
    found = problems(level, new, previous)
    assert (not found) == compatible, found
    if named is not None:
        assert any(named in p for p in found), found


# Confluent's JSON Schema diff examples (Confluent Schema Registry's json-schema-provider test
# resources; scripts/json_schema_confluent_examples.py runs all 263 of them), as strom's own table:
# (source, previous, new, compatible, the difference named when not). These are the cases strom
# disagreed on before it had rules for unevaluatedProperties/unevaluatedItems, minContains and
# switches between oneOf, anyOf and allOf, with their incompatible neighbours.
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"


def d2020(schema):
    return json.dumps({"$schema": DRAFT_2020, **schema})


def assert_verdict(found, compatible, named):
    assert (not found) == compatible, found
    if named is not None:
        assert any(named in p for p in found), found


def prop1(schema):
    return json.dumps({"type": "object", "properties": {"prop1": schema}})


COMBINED = "diff-combined-schema-examples.json"
EXAMPLES = "diff-schema-examples-2020-12.json"
STRING_NUMBER = [NUMBER, STRING]

CONFLUENT_EXAMPLE_CASES = [
    # COMBINED_TYPE_EXTENDED: oneOf read as anyOf, allOf as anyOf or oneOf (each also in
    # diff-combined-schema-examples-2020-12.json #10-#13 with a $schema)
    (f"{COMBINED} #10", prop1({"oneOf": [STRING]}), prop1({"anyOf": [STRING]}), True, None),
    (f"{COMBINED} #11", prop1({"oneOf": [STRING]}), prop1({"anyOf": STRING_NUMBER}), True, None),
    (f"{COMBINED} #12", prop1({"allOf": [STRING]}), prop1({"anyOf": [STRING]}), True, None),
    (f"{COMBINED} #14", prop1({"allOf": [STRING]}), prop1({"anyOf": STRING_NUMBER}), True, None),
    (f"{COMBINED} #15", prop1({"allOf": STRING_NUMBER}), prop1({"anyOf": [STRING]}), True, None),
    (f"{COMBINED} #16", prop1({"anyOf": [STRING]}), prop1({"oneOf": STRING_NUMBER}), True, None),
    (f"{COMBINED} #18", prop1({"allOf": [NUMBER]}), prop1({"oneOf": STRING_NUMBER}), True, None),
    (f"{COMBINED} #19", prop1({"allOf": STRING_NUMBER}), prop1({"oneOf": [STRING]}), True, None),
    (
        "diff-combined-schema-examples-2020-12.json #10",
        d2020({"properties": {"prop1": {"oneOf": [STRING]}}}),
        d2020({"properties": {"prop1": {"anyOf": [STRING]}}}),
        True,
        None,
    ),
    # ... and their incompatible neighbours: a branch lost, or a switch whose branches do not read
    (f"{COMBINED} #7", prop1({"oneOf": STRING_NUMBER}), prop1({"oneOf": [STRING]}), False, "SUM_TYPE_NARROWED"),
    (f"{COMBINED} #13", prop1({"oneOf": STRING_NUMBER}), prop1({"anyOf": [STRING]}), False, "COMBINED_TYPE_CHANGED"),
    (f"{COMBINED} #17", prop1({"anyOf": STRING_NUMBER}), prop1({"oneOf": [STRING]}), False, "COMBINED_TYPE_CHANGED"),
    (f"{COMBINED} #22", prop1({"anyOf": [STRING]}), prop1({"allOf": STRING_NUMBER}), False, "COMBINED_TYPE_CHANGED"),
    (f"{COMBINED} #23", prop1({"oneOf": [STRING]}), prop1({"allOf": STRING_NUMBER}), False, "COMBINED_TYPE_CHANGED"),
    (f"{COMBINED} #9", prop1({"allOf": [STRING]}), prop1({"allOf": [{"enum": ["one"]}, STRING]}), False, "PRODUCT"),
    (f"{COMBINED} #24", prop1(STRING), prop1({"anyOf": STRING_NUMBER}), True, None),
    # unevaluatedProperties as the content model
    (
        f"{EXAMPLES} #33",
        d2020({"properties": {"foo": STRING}, "unevaluatedProperties": False}),
        d2020({"properties": {"foo": STRING, "bar": NUMBER}, "unevaluatedProperties": False}),
        True,
        None,
    ),
    (
        f"{EXAMPLES} #36",
        d2020({"properties": {"foo": STRING}, "unevaluatedProperties": STRING}),
        d2020({"properties": {"foo": STRING, "bar": STRING}, "unevaluatedProperties": STRING}),
        True,
        None,
    ),
    (
        f"{EXAMPLES} #38",
        d2020({"properties": {"foo": STRING}, "unevaluatedProperties": STRING}),
        d2020({"properties": {"foo": STRING, "bar": NUMBER}, "unevaluatedProperties": STRING}),
        False,
        "TYPE_CHANGED",
    ),
    (
        f"{EXAMPLES} #40",
        d2020({"properties": {"foo": STRING}, "unevaluatedProperties": STRING}),
        d2020({"properties": {"foo": STRING, "bar": STRING}, "required": ["bar"], "unevaluatedProperties": STRING}),
        False,
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
    # unevaluatedItems past a tuple
    (
        f"{EXAMPLES} #68",
        d2020({"type": "array", "prefixItems": [STRING, NUMBER], "unevaluatedItems": STRING}),
        d2020({"type": "array", "prefixItems": [STRING, NUMBER, STRING], "unevaluatedItems": STRING}),
        True,
        None,
    ),
    (
        f"{EXAMPLES} #70",
        d2020({"type": "array", "prefixItems": [STRING, NUMBER], "unevaluatedItems": STRING}),
        d2020({"type": "array", "prefixItems": [STRING, NUMBER, NUMBER], "unevaluatedItems": STRING}),
        False,
        "items/2: TYPE_CHANGED",
    ),
    (
        f"{EXAMPLES} #72",
        d2020({"type": "array", "prefixItems": [STRING, NUMBER, STRING], "unevaluatedItems": STRING}),
        d2020({"type": "array", "prefixItems": [STRING, NUMBER], "unevaluatedItems": STRING}),
        True,
        None,
    ),
    (
        f"{EXAMPLES} #76",
        d2020({"type": "array", "prefixItems": [STRING, NUMBER, NUMBER], "unevaluatedItems": STRING}),
        d2020({"type": "array", "prefixItems": [STRING, NUMBER], "unevaluatedItems": STRING}),
        False,
        "items/2: TYPE_CHANGED",
    ),
    # minContains: removed (back to 1) or decreased is fine, increased is not
    (
        f"{EXAMPLES} #82",
        d2020({"type": "array", "contains": NUMBER, "minContains": 1}),
        d2020({"type": "array", "contains": NUMBER}),
        True,
        None,
    ),
    (
        f"{EXAMPLES} #83",
        d2020({"type": "array", "contains": NUMBER, "minContains": 1}),
        d2020({"type": "array", "contains": NUMBER, "minContains": 2}),
        False,
        "MIN_CONTAINS_INCREASED",
    ),
    (
        f"{EXAMPLES} #84",
        d2020({"type": "array", "contains": NUMBER, "minContains": 2}),
        d2020({"type": "array", "contains": NUMBER, "minContains": 1}),
        True,
        None,
    ),
]


@pytest.mark.parametrize(
    ("source", "previous", "new", "compatible", "named"),
    CONFLUENT_EXAMPLE_CASES,
    ids=[case[0] for case in CONFLUENT_EXAMPLE_CASES],
)
def test_confluent_diff_examples(source, previous, new, compatible, named):
    """Confluent's verdict: the new schema registered over the previous one at BACKWARD (STRICT)."""
    assert_verdict(problems("BACKWARD", new, previous), compatible, named)


# The rules behind those examples, each on its own, past what Confluent's examples cover: the
# writer's documents are what each side's keywords let through.
ARRAY = {"type": "array"}
COMPOSED = {"allOf": [{"properties": {"a": STRING}}], "properties": {"x": INT}, "unevaluatedProperties": False}
FLAT = {"properties": {"a": STRING, "x": INT}, "additionalProperties": False}

RULE_CASES = [
    # combinators: a writer's types are narrowed through its oneOf/anyOf/allOf
    ("BACKWARD", {"oneOf": [STRING]}, STRING, True, None),
    ("BACKWARD", {"oneOf": [STRING, NUMBER]}, STRING, False, "TYPE_NARROWED"),
    ("BACKWARD", {"anyOf": [STRING, NUMBER]}, {"anyOf": [NUMBER, STRING]}, True, None),
    ("BACKWARD", {"allOf": [STRING, {"maxLength": 5}]}, {"anyOf": [{"maxLength": 5}]}, True, None),
    ("BACKWARD", {"allOf": [STRING]}, {"oneOf": [NUMBER]}, False, "COMBINED_TYPE_CHANGED"),
    ("FORWARD", {"anyOf": [STRING]}, {"oneOf": [STRING]}, True, None),
    ("FULL", {"oneOf": [STRING]}, {"anyOf": [STRING, NUMBER]}, False, "FORWARD #/oneOf: COMBINED_TYPE_CHANGED"),
    # unevaluatedProperties: added closed or narrowed is refused, removed or widened is fine
    (
        "BACKWARD",
        {"properties": {"a": STRING}},
        {"properties": {"a": STRING}, "unevaluatedProperties": False},
        False,
        "UNEVALUATED_PROPERTIES_REMOVED",
    ),
    (
        "BACKWARD",
        {"properties": {"a": STRING}, "unevaluatedProperties": False},
        {"properties": {"a": STRING}},
        True,
        None,
    ),
    (
        "BACKWARD",
        {"properties": {"a": STRING}},
        {"properties": {"a": STRING}, "unevaluatedProperties": INT},
        False,
        "UNEVALUATED_PROPERTIES_NARROWED",
    ),
    ("BACKWARD", {"unevaluatedProperties": INT}, {"unevaluatedProperties": NUMBER}, True, None),
    ("BACKWARD", {"unevaluatedProperties": NUMBER}, {"unevaluatedProperties": INT}, False, "TYPE_NARROWED"),
    # ... the names its allOf branches give are evaluated there: a composed closed schema
    # flattened, or flattened back, keeps its documents
    ("BACKWARD", COMPOSED, FLAT, True, None),
    ("BACKWARD", FLAT, COMPOSED, True, None),
    ("BACKWARD", COMPOSED, COMPOSED, True, None),
    (
        "BACKWARD",
        COMPOSED,
        {"properties": {"x": INT}, "additionalProperties": False},
        False,
        "properties/a: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    (
        "BACKWARD",
        {**FLAT, "properties": {"a": NUMBER, "x": INT}},
        {**COMPOSED, "allOf": [{"properties": {"a": INT}}]},
        False,
        "allOf/0/properties/a: TYPE_NARROWED",
    ),
    # unevaluatedItems past a tuple: added closed is refused, removed is fine; an item contains
    # matches is evaluated
    (
        "BACKWARD",
        {**ARRAY, "prefixItems": [STRING]},
        {**ARRAY, "prefixItems": [STRING], "unevaluatedItems": False},
        False,
        "/items",
    ),
    (
        "BACKWARD",
        {**ARRAY, "prefixItems": [STRING], "unevaluatedItems": False},
        {**ARRAY, "prefixItems": [STRING]},
        True,
        None,
    ),
    (
        "BACKWARD",
        {**ARRAY, "items": STRING},
        {**ARRAY, "contains": STRING, "unevaluatedItems": False, "minContains": 0},
        True,
        None,
    ),
    (
        "BACKWARD",
        {**ARRAY, "items": NUMBER},
        {**ARRAY, "contains": STRING, "unevaluatedItems": False, "minContains": 0},
        False,
        "TYPE_CHANGED",
    ),
    # contains, minContains, maxContains
    ("BACKWARD", ARRAY, {**ARRAY, "contains": STRING}, False, "CONTAINS_ADDED"),
    ("BACKWARD", ARRAY, {**ARRAY, "contains": STRING, "minContains": 0}, True, None),
    ("BACKWARD", {**ARRAY, "contains": STRING}, ARRAY, True, None),
    ("BACKWARD", {**ARRAY, "contains": INT}, {**ARRAY, "contains": NUMBER}, True, None),
    ("BACKWARD", {**ARRAY, "contains": NUMBER}, {**ARRAY, "contains": INT}, False, "CONTAINS_NARROWED"),
    ("BACKWARD", {**ARRAY, "items": STRING, "minItems": 1}, {**ARRAY, "contains": STRING}, True, None),
    ("BACKWARD", {**ARRAY, "items": STRING}, {**ARRAY, "contains": STRING}, False, "MIN_CONTAINS_ADDED"),
    (
        "BACKWARD",
        {**ARRAY, "contains": STRING},
        {**ARRAY, "contains": STRING, "maxContains": 3},
        False,
        "MAX_CONTAINS_ADDED",
    ),
    (
        "BACKWARD",
        {**ARRAY, "contains": STRING, "maxContains": 2},
        {**ARRAY, "contains": STRING, "maxContains": 3},
        True,
        None,
    ),
    (
        "BACKWARD",
        {**ARRAY, "contains": STRING, "maxContains": 3},
        {**ARRAY, "contains": STRING, "maxContains": 2},
        False,
        "MAX_CONTAINS_DECREASED",
    ),
    (
        "BACKWARD",
        {**ARRAY, "maxItems": 2},
        {**ARRAY, "contains": STRING, "minContains": 0, "maxContains": 3},
        True,
        None,
    ),
    (
        "FORWARD",
        {**ARRAY, "contains": STRING, "minContains": 2},
        {**ARRAY, "contains": STRING, "minContains": 3},
        True,
        None,
    ),
]


@pytest.mark.parametrize(("level", "previous", "new", "compatible", "named"), RULE_CASES)
def test_combinator_unevaluated_and_contains_rules(level, previous, new, compatible, named):
    assert_verdict(problems(level, d2020(new), d2020(previous)), compatible, named)


def test_keywords_of_another_draft_holding_no_schema_get_an_answer():
    """Before 2019-09 unevaluated*, before 2020-12 prefixItems, before draft 6 contains, and
    after 2019-09 additionalItems are no keywords, so a schema may give them any value: the
    check leaves such a value out rather than failing on it."""
    draft4, draft7 = "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"
    odd = [
        (draft7, {"unevaluatedProperties": 5, "properties": {"a": STRING}}),
        (draft7, {"unevaluatedItems": "x", "items": [STRING]}),
        (draft7, {"prefixItems": [1], "type": "array"}),
        (draft4, {"contains": None, "type": "array"}),
        (draft7, {"contains": STRING, "minContains": "x", "maxContains": [1]}),
        (DRAFT_2020, {"additionalItems": 2.5, "type": "array"}),
    ]
    other = {"properties": {"b": STRING}, "contains": {}, "maxItems": 3, "unevaluatedProperties": NUMBER}
    for draft, schema in odd:
        odd_text, other_text = json.dumps({"$schema": draft, **schema}), json.dumps({"$schema": draft, **other})
        assert problems("FULL", odd_text, odd_text) == []
        assert isinstance(problems("FULL", odd_text, other_text), list)
        assert isinstance(problems("FULL", other_text, odd_text), list)


def test_a_check_past_its_budget_or_nested_too_deeply_is_refused_not_run_on():
    """Combinators nested in combinators multiply the comparisons (the check runs on the
    broker's loop): past json_schema_compatibility.MAX_STEPS, or past Python's recursion limit,
    the change is refused with TOO_COMPLEX; a large ordinary schema is not. A $ref cycle through
    anyOf ends where the pair it compares comes round again, with its answer."""

    def nest(depth, keyword):
        return STRING if depth == 0 else {keyword: [nest(depth - 1, keyword) for _ in range(4)]}

    nested_all, nested_any = json.dumps(nest(5, "allOf")), json.dumps(nest(5, "anyOf"))
    assert any("TOO_COMPLEX" in p and "comparisons" in p for p in problems("FULL", nested_all, nested_any))
    deep, deeper = STRING, NUMBER
    for _ in range(2000):  # deeper than the parser takes: the check's own guard, called directly
        deep, deeper = {"type": "object", "properties": {"a": deep}}, {"type": "object", "properties": {"a": deeper}}
    found = json_schema_compatibility.read_problems(json_schema.ParsedJson(deep), json_schema.ParsedJson(deeper))
    assert any("TOO_COMPLEX" in p and "nest too deeply" in p for p in found), found
    cycle = {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}] * 10 + [STRING]}}, "$ref": "#/$defs/a"}
    assert problems("FORWARD", json.dumps(STRING), d2020(cycle)) == []  # the cycle reads strings
    assert_verdict(problems("FORWARD", json.dumps(NUMBER), d2020(cycle)), False, "anyOf")
    inner = {f"q{k}": {"type": ["string", "null"]} for k in range(5)}
    wide = {f"p{i}": {"type": "object", "properties": inner} for i in range(300)}
    large = obj(wide, closed=True, oneOf=[{"required": [f"p{i}"]} for i in range(5)])
    assert problems("FULL", large, large) == []


# Draft 2019-09 and 2020-12: keywords beside a $ref apply with it (as an allOf of the two, which
# is what Confluent's translation of such a schema makes); in draft 7 and before they are ignored
OBJECT_A = {"type": "object", "properties": {"x": STRING, "y": INT}}
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_7 = "http://json-schema.org/draft-07/schema#"


def beside_ref(draft, **siblings):
    defs = "definitions" if draft == DRAFT_7 else "$defs"
    return json.dumps({"$schema": draft, defs: {"a": OBJECT_A}, "$ref": f"#/{defs}/a", **siblings})


REF_SIBLING_CASES = [
    # a required name beside the $ref, of a property the referenced schema has
    (DRAFT_2020, {}, {"required": ["x"]}, False, "required/x: REQUIRED_ATTRIBUTE_ADDED"),
    (DRAFT_2019, {}, {"required": ["x"]}, False, "required/x: REQUIRED_ATTRIBUTE_ADDED"),
    (DRAFT_2020, {"required": ["x"]}, {}, True, None),
    (DRAFT_2020, {"required": ["x"]}, {"required": ["x"]}, True, None),
    (DRAFT_2020, {}, {"required": ["x"], "properties": {"x": {**STRING, "default": ""}}}, True, None),
    # a property's schema narrowed beside the $ref, and the content model closed there
    (DRAFT_2020, {}, {"properties": {"x": {"maxLength": 3}}}, False, "properties/x: maxLength added"),
    (DRAFT_2020, {}, {"properties": {"y": NUMBER}}, True, None),
    (DRAFT_2020, {}, {"additionalProperties": False}, False, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    (DRAFT_2020, {"additionalProperties": False}, {}, True, None),
    # a type beside the $ref that the referenced schema has already changes no document (strom's
    # answer by documents; Confluent's diff calls any keyword added beside a $ref TYPE_CHANGED)
    (DRAFT_2020, {}, {"type": "object"}, True, None),
    (DRAFT_2020, {}, {"type": "string"}, False, "TYPE_CHANGED"),
    # annotations beside a $ref constrain nothing
    (DRAFT_2020, {}, {"description": "d", "title": "t", "$comment": "c"}, True, None),
    # draft 7: siblings of $ref are ignored, as its specification says
    (DRAFT_7, {}, {"required": ["x"]}, True, None),
    (DRAFT_7, {}, {"type": "string"}, True, None),
]


@pytest.mark.parametrize(("draft", "before", "after", "compatible", "named"), REF_SIBLING_CASES)
def test_keywords_beside_a_ref_apply_from_draft_2019_09(draft, before, after, compatible, named):
    assert_verdict(problems("BACKWARD", beside_ref(draft, **after), beside_ref(draft, **before)), compatible, named)


def test_a_ref_beside_keywords_inside_properties_and_in_a_cycle():
    """A property whose schema is a $ref with a bound beside it is narrowed by the bound; a
    recursive schema whose $ref carries keywords ends (the schema made for the $ref is made
    once, so the cycle meets it again)."""
    defs = {"name": STRING}
    old = d2020({"$defs": defs, "type": "object", "properties": {"n": {"$ref": "#/$defs/name"}}})
    new = d2020({"$defs": defs, "type": "object", "properties": {"n": {"$ref": "#/$defs/name", "maxLength": 3}}})
    assert_verdict(problems("BACKWARD", new, old), False, "properties/n: maxLength added")
    assert_verdict(problems("FORWARD", new, old), True, None)
    node = {
        "type": "object",
        "properties": {"v": INT, "next": {"$ref": "#/$defs/node", "required": ["v"], "description": "d"}},
    }
    tree = d2020({"$defs": {"node": node}, "$ref": "#/$defs/node"})
    assert problems("FULL", tree, tree) == []
    looser = d2020(
        {"$defs": {"node": {**node, "properties": {**node["properties"], "v": NUMBER}}}, "$ref": "#/$defs/node"}
    )
    assert_verdict(problems("BACKWARD", looser, tree), True, None)
    assert_verdict(problems("BACKWARD", tree, looser), False, "TYPE_NARROWED")


# unevaluatedItems through combinators (2020-12's annotations): the items an in-place branch's own
# tuple or items evaluates are not unevaluated; a reader counts those every accepted document has
# evaluated (each allOf branch's, the fewest of any anyOf branch's); a writer's item past its own
# tuple satisfies its unevaluatedItems or the schema of some branch that evaluated it
CLOSED_PAIR = {"prefixItems": [STRING, NUMBER], "items": False}
UNEVALUATED_ITEMS_CASES = [
    ("BACKWARD", CLOSED_PAIR, {"allOf": [{"prefixItems": [STRING, NUMBER]}], "unevaluatedItems": False}, True, None),
    ("BACKWARD", CLOSED_PAIR, {"allOf": [{"prefixItems": [STRING]}], "unevaluatedItems": False}, False, "/items/1"),
    ("BACKWARD", CLOSED_PAIR, {"allOf": [{"prefixItems": [STRING]}], "unevaluatedItems": NUMBER}, True, None),
    ("BACKWARD", {"items": STRING}, {"allOf": [{"items": STRING}], "unevaluatedItems": False}, True, None),
    (
        "BACKWARD",
        {"prefixItems": [STRING], "items": False},
        {"anyOf": [{"prefixItems": [STRING]}, {"prefixItems": [STRING, NUMBER]}], "unevaluatedItems": False},
        True,
        None,
    ),
    # ["a", "b"] passes the first branch only, which leaves its second item unevaluated
    (
        "BACKWARD",
        {"prefixItems": [STRING, STRING], "items": False},
        {"anyOf": [{"prefixItems": [STRING]}, {"prefixItems": [STRING, NUMBER]}], "unevaluatedItems": False},
        False,
        "/items/1",
    ),
    # the writer's side: its documents' items are what its branches evaluated them with
    ("BACKWARD", {"allOf": [{"prefixItems": [STRING]}], "unevaluatedItems": False}, {"items": STRING}, True, None),
    (
        "BACKWARD",
        {"allOf": [{"prefixItems": [STRING]}], "unevaluatedItems": False},
        {"items": NUMBER},
        False,
        "items/0: TYPE_CHANGED",
    ),
    (
        "BACKWARD",
        {"anyOf": [{"prefixItems": [STRING]}, {"prefixItems": [INT]}], "unevaluatedItems": False},
        {"items": NUMBER},
        False,
        "items/0: TYPE_CHANGED",
    ),
    (
        "BACKWARD",
        {"anyOf": [{"prefixItems": [STRING]}, {"prefixItems": [INT]}], "unevaluatedItems": False},
        {"items": {"type": ["string", "number"]}},
        True,
        None,
    ),
    # through a $ref beside unevaluatedItems
    (
        "BACKWARD",
        CLOSED_PAIR,
        {"$defs": {"pair": {"prefixItems": [STRING, NUMBER]}}, "$ref": "#/$defs/pair", "unevaluatedItems": False},
        True,
        None,
    ),
    # the same for properties: a writer's allOf gives its names, which its unevaluatedProperties
    # does not refuse, so a reader's allOf branch is compared with them
    (
        "BACKWARD",
        {"type": "object", "allOf": [{"properties": {"a": STRING}}], "unevaluatedProperties": False},
        {"type": "object", "allOf": [{"properties": {"a": NUMBER}}]},
        False,
        "allOf/0",
    ),
    (
        "BACKWARD",
        {"type": "object", "allOf": [{"properties": {"a": STRING}}], "unevaluatedProperties": False},
        {"type": "object", "allOf": [{"properties": {"a": STRING}}]},
        True,
        None,
    ),
    # anyOf branches count for the fewest items any of them evaluates, which judges this schema
    # stricter than it is against others; against itself it is compatible
    (
        "FULL",
        {"prefixItems": [STRING], "unevaluatedItems": NUMBER, "anyOf": [{"unevaluatedItems": True}, {}]},
        {"prefixItems": [STRING], "unevaluatedItems": NUMBER, "anyOf": [{"unevaluatedItems": True}, {}]},
        True,
        None,
    ),
]


@pytest.mark.parametrize(("level", "previous", "new", "compatible", "named"), UNEVALUATED_ITEMS_CASES)
def test_unevaluated_items_through_combinators(level, previous, new, compatible, named):
    assert_verdict(problems(level, d2020({**ARRAY, **new}), d2020({**ARRAY, **previous})), compatible, named)


def test_no_backward_yes_that_a_document_refutes():
    """A differential probe, fixed seed: random draft 2020-12 pairs (with $ref beside keywords,
    and array branches under unevaluatedItems); for every pair strom calls BACKWARD compatible,
    no random document the old schema accepts may be refused by the new one (jsonschema's
    validation). A document refused only by a required name is left out: Confluent counts only
    required names of properties (the leniency the guide names)."""
    from jsonschema import Draft202012Validator

    rng = random.Random(7)
    leaves = [STRING, NUMBER, INT, {"type": "boolean"}, {}, {"type": ["string", "null"]}, {"enum": ["a", 1]}, True]

    def schema(depth=0, refs=True):
        roll = rng.random()
        if depth >= 3 or roll < 0.25:
            return rng.choice(leaves)
        if roll < 0.4:
            if not refs:
                return rng.choice(leaves)
            found = {"$ref": "#/$defs/" + rng.choice("pq")}
            extra = schema(depth + 1)
            if rng.random() < 0.6 and isinstance(extra, dict):
                found.update({k: v for k, v in extra.items() if k != "$ref"})
            return found
        if roll < 0.5:
            return {rng.choice(["anyOf", "allOf"]): [schema(depth + 1, refs) for _ in range(rng.randint(1, 3))]}
        if roll < 0.7:
            found = {"type": "object", "properties": {k: schema(depth + 1, refs) for k in rng.sample("abc", 2)}}
            found[rng.choice(["unevaluatedProperties", "additionalProperties"])] = rng.choice([False, STRING, True])
            if rng.random() < 0.3:
                found["required"] = rng.sample("abc", 1)
            return found
        found = {"type": "array"}
        if rng.random() < 0.4:
            found["prefixItems"] = [schema(depth + 1, refs) for _ in range(rng.randint(1, 2))]
        found[rng.choice(["items", "unevaluatedItems", "unevaluatedItems"])] = rng.choice([False, STRING, NUMBER])
        if rng.random() < 0.5:
            branches = [{"prefixItems": [schema(depth + 1, refs) for _ in range(rng.randint(1, 3))]}]
            branches += [rng.choice([{"items": schema(depth + 1, refs)}, {"contains": STRING}, {}])]
            found[rng.choice(["anyOf", "allOf"])] = branches
        return found

    def value(depth=0):
        roll = rng.random()
        if depth >= 3 or roll < 0.4:
            return rng.choice(["", "a", 0, 1, 2.5, True, None])
        if roll < 0.65:
            return {k: value(depth + 1) for k in rng.sample("abcd", rng.randint(0, 3))}
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    def without_required(node):
        if isinstance(node, dict):
            return {k: without_required(v) for k, v in node.items() if k != "required"}
        return [without_required(v) for v in node] if isinstance(node, list) else node

    compatible = 0
    for _ in range(250):
        defs = {"p": schema(1, refs=False), "q": schema(1, refs=False)}
        old = {"$schema": DRAFT_2020, "$defs": defs, "allOf": [schema()]}
        new = {"$schema": DRAFT_2020, "$defs": defs, **({"allOf": [schema()]} if rng.random() < 0.5 else old)}
        if rng.random() < 0.5:  # the old schema with keywords beside
            extra = schema(1)
            new = {**new, **(extra if isinstance(extra, dict) else {})}
        if problems("BACKWARD", json.dumps(new), json.dumps(old)):
            continue
        compatible += 1
        accepts, refuses = Draft202012Validator(old), Draft202012Validator(new)
        lenient = Draft202012Validator(without_required(new))
        for _ in range(150):
            document = value()
            if accepts.is_valid(document) and not refuses.is_valid(document):
                assert lenient.is_valid(document), (old, new, document)
    assert compatible > 50  # the probe looked at a fair number of yeses


def test_keywords_beside_a_ref_to_another_document_and_in_a_draft_2019_09_tuple():
    """A $ref to a referenced document with keywords beside it, in a 2020-12 schema, applies them
    too (a document without $schema of its own keeps the draft of the one referring to it); a
    draft 2019-09 tuple (``items`` as a list) under an allOf branch is the branch's to evaluate."""
    address = json.dumps({"type": "object", "properties": {"zip": STRING, "city": STRING}})

    def order(**beside):
        text = d2020({"type": "object", "properties": {"ship_to": {"$ref": "address.json", **beside}}})
        return json_schema.parse(text, [("address.json", address)])[0]

    assert json_schema.compatibility_problems("BACKWARD", order(required=["zip"]), [order()])
    assert not json_schema.compatibility_problems("BACKWARD", order(), [order(required=["zip"])])
    found = json_schema.compatibility_problems("BACKWARD", order(properties={"zip": {"maxLength": 5}}), [order()])
    assert any("ship_to/properties/zip" in p and "maxLength" in p for p in found), found
    draft_2019 = {"$schema": DRAFT_2019, "type": "array"}
    pair = json.dumps({**draft_2019, "items": [STRING, NUMBER], "additionalItems": False})
    composed = json.dumps({**draft_2019, "allOf": [{"items": [STRING, NUMBER]}], "unevaluatedItems": False})
    assert problems("BACKWARD", composed, pair) == []
    shorter = json.dumps({**draft_2019, "allOf": [{"items": [STRING]}], "unevaluatedItems": False})
    assert_verdict(problems("BACKWARD", shorter, pair), False, "items/1")
