"""IMPORT mode of the Schema Registry on one real broker: a registry migrated with its ids, as
Confluent's registry allows (PUT /mode IMPORT on an empty scope, then POST .../versions with "id"
and "version"), read back with confluent-kafka's SchemaRegistryClient and its Avro deserializer,
and the ids handed out afterwards never collide with an imported one, also after a restart."""

from __future__ import annotations

import json
import struct

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.test_schema_registry import broker, call, registry_url  # noqa: F401 (fixture)

ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}


def imported(url: str, subject: str, schema: dict, schema_id: int, version: int | None = None):
    body: dict = {"schema": json.dumps(schema), "id": schema_id}
    if version is not None:
        body["version"] = version
    return call(url, "POST", f"/subjects/{subject}/versions", body)


def error_of(reply) -> tuple[int, int]:
    status, _, body = reply
    return status, body["error_code"]


def test_import_keeps_ids_and_versions_and_new_ids_go_above_them(broker):  # noqa: F811
    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    # an id without IMPORT mode: 42205, and nothing is written
    assert error_of(imported(url, "orders-value", ORDER_V1, 100)) == (422, 42205)
    assert call(url, "GET", "/subjects")[2] == []

    assert call(url, "PUT", "/mode", {"mode": "IMPORT"})[:3:2] == (200, {"mode": "IMPORT"})
    assert call(url, "GET", "/mode")[2] == {"mode": "IMPORT"}
    # in IMPORT mode a registration must name its id
    reply = call(url, "POST", "/subjects/orders-value/versions", {"schema": json.dumps(ORDER_V1)})
    assert error_of(reply) == (422, 42205) and "not in read-write mode" in reply[2]["message"]

    # versions as the old registry had them (a gap: version 3, no 2), ids far apart, no compatibility
    # check (ORDER_V1 after OTHER would be refused under BACKWARD in a subject of its own)
    assert imported(url, "orders-value", ORDER_V1, 100, 1)[2] == {"id": 100, "version": 1}
    assert imported(url, "orders-value", ORDER_V2, 7, 3)[2] == {"id": 7, "version": 3}
    assert imported(url, "mixed-value", OTHER, 55)[2] == {"id": 55, "version": 1}
    assert imported(url, "mixed-value", ORDER_V1, 100)[2] == {"id": 100, "version": 2}
    # the same registration again is answered with what is there; another schema under a taken id is not
    assert imported(url, "orders-value", ORDER_V1, 100)[2] == {"id": 100, "version": 1}
    reply = imported(url, "orders-value", OTHER, 7, 4)
    assert error_of(reply) == (422, 42205) and reply[2]["message"] == "Overwrite new schema with id 7 is not permitted."
    assert error_of(imported(url, "orders-value", OTHER, "7")) == (422, 42201)  # not an integer
    assert error_of(imported(url, "orders-value", OTHER, 2**31)) == (422, 42201)

    assert call(url, "GET", "/subjects/orders-value/versions")[2] == [1, 3]
    assert client.get_schema(100).schema_str == json.dumps(ORDER_V1, separators=(",", ":"))
    latest = client.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version) == (7, 3)
    assert call(url, "GET", "/schemas/ids/100/versions")[2] == [
        {"subject": "mixed-value", "version": 2},
        {"subject": "orders-value", "version": 1},
    ]

    # a record written under the old registry's id 7 decodes against the imported schema
    context = SerializationContext("orders", MessageField.VALUE)
    old_record = b"\x00" + struct.pack(">I", 7) + b"\x54" + b"\x02" + b"\x04hi"  # id=42, note="hi"
    assert AvroDeserializer(client)(old_record, context) == {"id": 42, "note": "hi"}

    # back to READWRITE: a registration needs no id, takes the next id above every imported one
    assert call(url, "PUT", "/mode", {"mode": "READWRITE"})[0] == 200
    assert error_of(imported(url, "orders-value", OTHER, 101)) == (422, 42205)  # "not in import mode"
    fresh = client.register_schema("fresh-value", Schema(json.dumps(OTHER | {"name": "Fresh"}), "AVRO"))
    assert fresh == 101
    # a schema equal to an imported one gets the imported id, with the next version of its subject
    encoded = AvroSerializer(client, json.dumps(ORDER_V2))({"id": 1, "note": None}, context)
    assert encoded[:5] == b"\x00" + struct.pack(">I", 7)
    assert client.get_latest_version("orders-value").version == 3  # already there: no new version

    # after a restart the ids are where they were and the next one is still above them
    broker.restart()
    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    assert client.get_schema(55).schema_str == json.dumps(OTHER, separators=(",", ":"))
    assert call(url, "GET", "/mode")[2] == {"mode": "READWRITE"}
    assert client.register_schema("after-value", Schema(json.dumps(OTHER | {"name": "After"}), "AVRO")) == 102


def test_entering_import_mode_needs_an_empty_scope(broker):  # noqa: F811
    url = registry_url(broker)
    assert call(url, "POST", "/subjects/live-value/versions", {"schema": json.dumps(OTHER)})[0] == 200
    assert call(url, "POST", "/subjects/gone-value/versions", {"schema": json.dumps(ORDER_V1)})[0] == 200
    gone_id = call(url, "GET", "/subjects/gone-value/versions/1")[2]["id"]
    assert call(url, "DELETE", "/subjects/gone-value")[0] == 200  # soft-deleted only

    # the registry holds a live subject: the global mode cannot become IMPORT, nor live-value's
    reply = call(url, "PUT", "/mode", {"mode": "IMPORT"})
    assert error_of(reply) == (422, 42205) and reply[2]["message"] == "Cannot import since found existing subjects"
    assert error_of(call(url, "PUT", "/mode/live-value", {"mode": "IMPORT"})) == (422, 42205)
    assert call(url, "GET", "/mode")[2] == {"mode": "READWRITE"}

    # a subject with only soft-deleted versions may: they are deleted for good on the way in
    assert call(url, "PUT", "/mode/gone-value", {"mode": "IMPORT"})[2] == {"mode": "IMPORT"}
    assert call(url, "GET", "/subjects?deleted=true")[2] == ["live-value"]
    assert imported(url, "gone-value", OTHER | {"name": "Again"}, 40, 5)[2] == {"id": 40, "version": 5}
    assert call(url, "GET", "/subjects/gone-value/versions")[2] == [5]
    # ... and the id of the version deleted for good is not handed out again
    fresh = call(url, "POST", "/subjects/new-value/versions", {"schema": json.dumps(ORDER_V2)})[2]["id"]
    assert fresh == 41 and fresh != gone_id
    # deletes are allowed in IMPORT mode (a failed import can be cleaned up)
    assert call(url, "DELETE", "/subjects/gone-value")[2] == [5]

    # force=true enters IMPORT mode over live subjects, and leaves them as they are
    assert call(url, "PUT", "/mode?force=true", {"mode": "IMPORT"})[2] == {"mode": "IMPORT"}
    assert call(url, "GET", "/subjects")[2] == ["live-value", "new-value"]
    assert error_of(call(url, "PUT", "/mode", {"mode": "SOMETIMES"})) == (422, 42204)

    # a global READONLY_OVERRIDE wins over a subject's own READWRITE (Confluent's mode in scope)
    assert call(url, "PUT", "/mode/live-value", {"mode": "READWRITE"})[0] == 200
    assert call(url, "PUT", "/mode", {"mode": "READONLY_OVERRIDE"})[0] == 200
    reply = call(url, "POST", "/subjects/live-value/versions", {"schema": json.dumps(OTHER | {"name": "No"})})
    assert error_of(reply) == (422, 42205) and "read-only" in reply[2]["message"]
    assert call(url, "GET", "/mode/live-value")[2] == {"mode": "READONLY_OVERRIDE"}
    assert call(url, "PUT", "/mode", {"mode": "READWRITE"})[0] == 200
    assert call(url, "GET", "/mode/live-value")[2] == {"mode": "READWRITE"}


def versions_with_deleted(url: str, subject: str) -> list[int]:
    return call(url, "GET", f"/subjects/{subject}/versions?deleted=true")[2]


def test_id_zero_is_an_id_and_negative_ids_are_none(broker):  # noqa: F811
    """Confluent's registry reads a request's absent or negative id as none and 0 as an id
    (Schema(subject, RegisterSchemaRequest): id -1 when absent; register: ``schemaId >= 0``)."""
    url = registry_url(broker)
    assert call(url, "PUT", "/mode", {"mode": "IMPORT"})[0] == 200
    assert imported(url, "zero-value", ORDER_V1, 0, 1)[2] == {"id": 0, "version": 1}
    assert json.loads(call(url, "GET", "/schemas/ids/0")[2]["schema"]) == ORDER_V1
    assert call(url, "GET", "/schemas/ids/0/versions")[2] == [{"subject": "zero-value", "version": 1}]
    # the same again is answered with what is there, also naming its version
    assert imported(url, "zero-value", ORDER_V1, 0)[2] == {"id": 0, "version": 1}
    assert imported(url, "zero-value", ORDER_V1, 0, 1)[2] == {"id": 0, "version": 1}
    # another schema cannot take id 0
    reply = imported(url, "zero-value", OTHER, 0, 2)
    assert error_of(reply) == (422, 42205) and reply[2]["message"] == "Overwrite new schema with id 0 is not permitted."
    # a negative id is no id: IMPORT mode wants one
    reply = imported(url, "zero-value", ORDER_V2, -5)
    assert error_of(reply) == (422, 42205) and "not in read-write mode" in reply[2]["message"]
    # a version of 0 (or negative) is no version: the next one
    assert imported(url, "zero-value", ORDER_V2, 3, 0)[2] == {"id": 3, "version": 2}
    assert versions_with_deleted(url, "zero-value") == [1, 2]

    assert call(url, "PUT", "/mode", {"mode": "READWRITE"})[0] == 200
    assert call(url, "POST", "/subjects/n-value/versions", {"schema": json.dumps(OTHER), "id": -1})[2] == {
        "id": 4,
        "version": 1,
    }
    # a record written under id 0 decodes
    client = SchemaRegistryClient({"url": url})
    context = SerializationContext("zero", MessageField.VALUE)
    assert AvroDeserializer(client)(b"\x00\x00\x00\x00\x00\x54", context) == {"id": 42}


def test_a_soft_deleted_version_with_the_registered_id_is_deleted_for_good(broker):  # noqa: F811
    """As Confluent's KafkaSchemaRegistry.register: registering a schema under the id of a
    soft-deleted earlier version of the subject (the same schema again, or an import naming that
    id) tombstones that version, unless a schema, soft-deleted or not, still references it."""
    url = registry_url(broker)
    body = {"schema": json.dumps(ORDER_V1)}
    first = call(url, "POST", "/subjects/again-value/versions", body)[2]
    assert call(url, "DELETE", "/subjects/again-value/versions/1")[2] == 1
    assert versions_with_deleted(url, "again-value") == [1]
    # the same schema again: its old id, a new version, and version 1 is gone for good
    assert call(url, "POST", "/subjects/again-value/versions", body)[2] == {"id": first["id"], "version": 2}
    assert versions_with_deleted(url, "again-value") == [2]
    assert error_of(call(url, "GET", "/subjects/again-value/versions/1?deleted=true")) == (404, 40402)

    # a soft-deleted version another schema references is kept
    base = {"type": "record", "name": "Base", "fields": [{"name": "b", "type": "int"}]}
    holder = {"type": "record", "name": "Holder", "fields": [{"name": "base", "type": "Base"}]}
    base_id = call(url, "POST", "/subjects/base-value/versions", {"schema": json.dumps(base)})[2]["id"]
    # soft-deleted before anything names it (a referenced version is not deleted: 42206); a
    # reference still resolves to it
    assert call(url, "DELETE", "/subjects/base-value/versions/1")[0] == 200
    references = [{"name": "Base", "subject": "base-value", "version": 1}]
    reply = call(
        url, "POST", "/subjects/holder-value/versions", {"schema": json.dumps(holder), "references": references}
    )
    assert reply[0] == 200
    assert call(url, "DELETE", "/subjects/holder-value")[0] == 200  # the referrer soft-deleted: still counts
    assert error_of(call(url, "DELETE", "/subjects/base-value/versions/1?permanent=true")) == (422, 42206)
    again = call(url, "POST", "/subjects/base-value/versions", {"schema": json.dumps(base)})[2]
    assert again == {"id": base_id, "version": 2}
    assert versions_with_deleted(url, "base-value") == [1, 2]

    # an import naming the id of a soft-deleted version (IMPORT entered with force, which keeps it)
    other = call(url, "POST", "/subjects/moved-value/versions", {"schema": json.dumps(OTHER)})[2]["id"]
    assert call(url, "DELETE", "/subjects/moved-value")[0] == 200
    assert call(url, "PUT", "/mode/moved-value?force=true", {"mode": "IMPORT"})[0] == 200
    assert versions_with_deleted(url, "moved-value") == [1]
    assert imported(url, "moved-value", OTHER, other, 7)[2] == {"id": other, "version": 7}
    assert versions_with_deleted(url, "moved-value") == [7]
    assert call(url, "GET", f"/schemas/ids/{other}/versions?deleted=true")[2] == [
        {"subject": "moved-value", "version": 7}
    ]
