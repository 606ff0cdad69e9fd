"""Avro compatibility, checked against the cases Confluent's documentation gives per level."""

import json

import pytest

from strom.schemas import avro


def record(*fields, name="User"):
    return json.dumps({"type": "record", "name": name, "namespace": "ex", "fields": list(fields)})


def parsed(text):
    return avro.parse(text)[0]


def problems(level, new, *previous):
    return avro.compatibility_problems(level, parsed(new), [parsed(p) for p in previous])


NAME = {"name": "name", "type": "string"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}
AGE = {"name": "age", "type": "int"}

# (level, previous, new, compatible): Confluent's "Schema Evolution and Compatibility" summary
CASES = [
    # BACKWARD: delete fields, add optional fields; adding a required field is refused
    ("BACKWARD", record(NAME, AGE), record(NAME), True),
    ("BACKWARD", record(NAME), record(NAME, AGE_DEFAULT), True),
    ("BACKWARD", record(NAME), record(NAME, AGE), False),
    # FORWARD: add fields, delete optional fields; deleting a required field is refused
    ("FORWARD", record(NAME), record(NAME, AGE), True),
    ("FORWARD", record(NAME, AGE_DEFAULT), record(NAME), True),
    ("FORWARD", record(NAME, AGE), record(NAME), False),
    # FULL: only optional fields come and go
    ("FULL", record(NAME), record(NAME, AGE_DEFAULT), True),
    ("FULL", record(NAME, AGE_DEFAULT), record(NAME), True),
    ("FULL", record(NAME), record(NAME, AGE), False),
    ("FULL", record(NAME, AGE), record(NAME), False),
    # NONE: anything
    ("NONE", record(NAME), '"string"', True),
]


@pytest.mark.parametrize("level,previous,new,compatible", CASES)
def test_documented_cases(level, previous, new, compatible):
    assert (not problems(level, new, previous)) is compatible


def test_transitive_levels_check_every_version_and_the_others_only_the_latest():
    v1 = record({"name": "f", "type": "string"})
    v2 = record()
    v3 = record({"name": "f", "type": "int", "default": 0})
    assert not problems("BACKWARD", v3, v1, v2)  # v3 reads v2's data
    found = problems("BACKWARD_TRANSITIVE", v3, v1, v2)  # but not v1's string f
    assert found and "int does not read the writer's type string" in found[0]
    assert not problems("FORWARD", v3, v1, v2)  # v2 reads v3's data
    assert problems("FORWARD_TRANSITIVE", v3, v1, v2)
    assert problems("FULL_TRANSITIVE", v3, v1, v2)


@pytest.mark.parametrize(
    "writer,reader,readable",
    [
        ('"int"', '"long"', True),
        ('"int"', '"double"', True),
        ('"long"', '"int"', False),
        ('"float"', '"double"', True),
        ('"string"', '"bytes"', True),
        ('"bytes"', '"string"', True),
        ('"string"', '["null","string"]', True),
        ('["null","string"]', '"string"', False),
        ('["int","string"]', '["long","string","null"]', True),
        ('{"type":"array","items":"int"}', '{"type":"array","items":"long"}', True),
        ('{"type":"map","values":"long"}', '{"type":"map","values":"int"}', False),
        ('{"type":"enum","name":"E","symbols":["A","B"]}', '{"type":"enum","name":"E","symbols":["A","B","C"]}', True),
        ('{"type":"enum","name":"E","symbols":["A","B"]}', '{"type":"enum","name":"E","symbols":["A"]}', False),
        (
            '{"type":"enum","name":"E","symbols":["A","B"]}',
            '{"type":"enum","name":"E","symbols":["A","Z"],"default":"Z"}',
            True,
        ),
        ('{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"F","size":8}', False),
        ('{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"G","size":4}', False),
        (record(NAME, name="A"), record(NAME, name="B"), False),
        (record(NAME, name="A"), json.dumps({**json.loads(record(NAME, name="B")), "aliases": ["ex.A"]}), True),
        ('{"type":"int","logicalType":"date"}', '"int"', True),
    ],
)
def test_schema_resolution_rules(writer, reader, readable):
    assert (not avro.read_problems(parsed(reader), parsed(writer))) is readable


def test_renamed_field_is_read_through_an_alias():
    writer = record({"name": "old", "type": "string"})
    reader = record({"name": "new", "type": "string", "aliases": ["old"]})
    assert not avro.read_problems(parsed(reader), parsed(writer))


def test_recursive_types_terminate():
    linked = record({"name": "next", "type": ["null", "ex.User"], "default": None})
    assert not problems("FULL_TRANSITIVE", linked, linked)


@pytest.mark.parametrize(
    "text", ['{"type":"recrd"}', "not json", record({"name": "a", "type": "int", "default": "x"}), '"ex.Missing"']
)
def test_invalid_schemas_are_refused(text):
    with pytest.raises(avro.InvalidSchemaError):
        avro.parse(text)


def test_canonical_text_drops_whitespace_and_normalize_spells_types_one_way():
    text = '{ "type": "record", "name": "R", "fields": [ {"name": "a", "type": {"type": "int"}} ] }'
    assert avro.parse(text)[1] == '{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"int"}}]}'
    assert avro.normalized(avro.parse(text)[1]) == avro.normalized(
        '{"fields":[{"type":"int","name":"a"}],"name":"R","type":"record"}'
    )
