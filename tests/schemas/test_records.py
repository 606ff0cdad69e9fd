"""The _schemas records byte for byte as Confluent Schema Registry writes them."""

import pytest

from strom.schemas import records as rec


def test_keys_are_confluents_bytes():
    assert rec.encode_key(rec.SchemaKey("orders-value", 3)) == (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    )
    assert rec.encode_key(rec.ConfigKey(None)) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert rec.encode_key(rec.ConfigKey("s")) == b'{"keytype":"CONFIG","subject":"s","magic":0}'
    assert rec.encode_key(rec.ModeKey(None)) == b'{"keytype":"MODE","subject":null,"magic":0}'
    assert rec.encode_key(rec.DeleteSubjectKey("s")) == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert rec.encode_key(rec.NoopKey()) == b'{"keytype":"NOOP","magic":0}'


def test_records_written_by_confluent_are_read():
    # as a Confluent registry wrote them (AVRO without schemaType, other field orders and spacing)
    key = rec.decode_key(b'{"subject":"subject_0","version":1,"magic":1,"keytype":"SCHEMA"}')
    assert key == rec.SchemaKey("subject_0", 1)
    value = rec.decode_schema_value(
        b'{"subject":"subject_0","version":1,"id":7,"schema":"\\"string\\"","deleted":false}'
    )
    assert (value.id, value.schema, value.schema_type, value.references, value.deleted) == (
        7,
        '"string"',
        "AVRO",
        [],
        False,
    )
    assert rec.decode_config_value(b'{"compatibilityLevel":"FULL"}') == "FULL"
    assert rec.decode_mode_value(b'{"mode":"READONLY"}') == "READONLY"
    assert rec.decode_delete_subject_value(b'{"subject":"s","version":2}') == 2
    assert rec.decode_key(b'{"keytype":"NOOP","magic":0}') == rec.NoopKey()


def test_schema_value_round_trips():
    value = rec.SchemaValue("s", 2, 5, '{"type":"string"}', "AVRO", [{"name": "a", "subject": "b", "version": 1}])
    encoded = rec.encode_schema_value(value)
    assert encoded.startswith(b'{"subject":"s","version":2,"id":5,"schema":')
    assert rec.decode_schema_value(encoded) == value


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1]", b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}', b'{"keytype":"SCHEMA","version":1}'],
)
def test_unreadable_keys_are_format_errors(raw):
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(raw)
