"""Schema references for Avro and JSON Schema in the strom source and sink (strom.spark.schema_references):
records written by confluent-kafka's AvroSerializer and JSONSerializer with a schema that uses what
another subject defines are read as typed columns, and the sink registers its schema with the
references option value.schema.references names, so that confluent-kafka's deserializers read back
exactly what was produced; on one broker and on three."""

from __future__ import annotations

import io
import json

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.spark.schema_references import avro_self_contained
from tests.spark.conftest import wait_for
from tests.spark.typed_support import produce_raw, read_committed

# Avro: a customer whose address and country are types of two other subjects (the address's
# subject itself refers to the country's); the reference names are the types' full names
COUNTRY = {"type": "enum", "name": "Country", "namespace": "geo", "symbols": ["DE", "FR", "NL"]}
ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "geo",
    "fields": [
        {"name": "street", "type": "string"},
        {"name": "country", "type": "Country"},
        {"name": "zip", "type": ["null", "int"], "default": None},
    ],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "home", "type": "geo.Address"},
        {"name": "work", "type": ["null", "geo.Address"], "default": None},  # the type used a second time
        {"name": "born", "type": "geo.Country"},
    ],
}
CUSTOMER_TYPE = (
    "struct<id:bigint,name:string,home:struct<street:string,country:string,zip:int>,"
    "work:struct<street:string,country:string,zip:int>,born:string>"
)
# the two referenced subjects, named as Avro types are by convention
AVRO_REFERENCES = [SchemaReference("geo.Address", "geo.Address", 1), SchemaReference("geo.Country", "geo.Country", 1)]
AVRO_REFERENCES_OPTION = json.dumps(
    [{"name": "geo.Address", "subject": "geo.Address"}, {"name": "geo.Country", "subject": "geo.Country", "version": 1}]
)


def customer(i: int) -> dict:
    countries = ["DE", "FR", "NL"]
    home = {"street": f"Straße {i}", "country": countries[i % 3], "zip": None if i % 4 == 0 else 10000 + i}
    work = None if i % 2 else {"street": f"Office {i}", "country": countries[(i + 1) % 3], "zip": 20000 + i}
    return {"id": i, "name": f"customer-{i}", "home": home, "work": work, "born": countries[(i + 2) % 3]}


# JSON Schema: a customer whose address is another subject's document, named by the URI its $ref
# resolves to against the customer's $id (as Confluent's documentation writes them)
ADDRESS_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"street": {"type": "string"}, "city": {"$ref": "#/definitions/City"}},
    "required": ["street"],
    "definitions": {"City": {"type": "string"}},  # a local $ref inside the referenced document
}
CUSTOMER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$id": "https://example.com/customer.json",
    "title": "Customer",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "home": {"$ref": "address.json"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "home"],
}
ADDRESS_URI = "https://example.com/address.json"
CUSTOMER_JSON_TYPE = "struct<id:bigint,name:string,home:struct<street:string,city:string>,tags:array<string>>"


def customer_json(i: int) -> dict:
    return {
        "id": i,
        "name": f"c-{i}-ü",
        "home": {"street": f"s{i}", "city": f"city-{i % 3}"},
        "tags": [f"t{i}"] * (i % 3),
    }


def register_avro_references(client: SchemaRegistryClient) -> None:
    client.register_schema("geo.Country", Schema(json.dumps(COUNTRY), "AVRO"))
    address = Schema(json.dumps(ADDRESS), "AVRO", [SchemaReference("geo.Country", "geo.Country", 1)])
    client.register_schema("geo.Address", address)


def serialized(serializer, topic: str, records: list[dict]) -> list[bytes]:
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(r, context) for r in records]


def raw_values(typed, topic: str, partitions: int) -> list[bytes]:
    return read_committed(typed.bootstrap, topic, partitions, lambda msg: msg.value())


def test_avro_self_contained_writes_the_bytes_of_fastavros_named_schemas():
    """The self-contained text encodes a record to the same bytes as the customer schema parsed
    with its references as fastavro's named_schemas (what confluent-kafka's AvroSerializer does),
    each referenced type written in once, at its first use; a schema without references is unchanged."""
    text = avro_self_contained(json.dumps(CUSTOMER), [json.dumps(COUNTRY), json.dumps(ADDRESS)])
    named: dict = {}
    for other in (COUNTRY, ADDRESS):
        fastavro.parse_schema(other, named_schemas=named)
    theirs, ours = fastavro.parse_schema(CUSTOMER, named_schemas=named), fastavro.parse_schema(json.loads(text))
    for i in range(8):
        a, b = io.BytesIO(), io.BytesIO()
        fastavro.schemaless_writer(a, theirs, customer(i))
        fastavro.schemaless_writer(b, ours, customer(i))
        assert a.getvalue() == b.getvalue()
        assert fastavro.schemaless_reader(io.BytesIO(b.getvalue()), ours, None) == customer(i)
    assert text.count('"name":"geo.Address"') == 1 and text.count('"name":"geo.Country"') == 1
    # a referenced type without a namespace keeps the null namespace inside the customer's
    plain = avro_self_contained(
        json.dumps({**CUSTOMER, "fields": [{"name": "note", "type": "Note"}]}),
        [json.dumps({"type": "record", "name": "Note", "fields": [{"name": "text", "type": "string"}]})],
    )
    assert json.loads(plain)["fields"][0]["type"]["namespace"] == ""
    assert fastavro.parse_schema(json.loads(plain))
    assert avro_self_contained(json.dumps(CUSTOMER), []) == json.dumps(CUSTOMER)


def test_json_ref_to_another_document_is_followed_into_the_referenced_schemas():
    """A $ref to another document is resolved against the $id around it (or taken as it is without
    one) into the documents the references name, local $refs there against that document; one to a
    document not given is refused with its path."""
    from strom.spark.json_types import JsonTypeError, spark_type

    documents = {ADDRESS_URI: ADDRESS_JSON}
    assert spark_type(CUSTOMER_JSON, documents).simpleString() == CUSTOMER_JSON_TYPE
    without_id = {k: v for k, v in CUSTOMER_JSON.items() if k != "$id"}
    assert spark_type(without_id, {"address.json": ADDRESS_JSON}).simpleString() == CUSTOMER_JSON_TYPE
    with pytest.raises(JsonTypeError, match=r"#/properties/home: 'address.json' names no schema given"):
        spark_type(without_id, documents)


def test_avro_with_references_read_as_columns_and_written_back_byte_exact(spark, typed_broker):
    """Customers serialized by AvroSerializer with a schema referring to geo.Address (which refers to
    geo.Country) are read as typed columns; the sink, given the same text and value.schema.references,
    registers it with those references and writes the very bytes the serializer wrote, which
    AvroDeserializer reads back; without the references option the write is refused before it starts."""
    typed, client = typed_broker, typed_broker.client
    typed.topics("customers", "customers-out", "customers-again")
    register_avro_references(client)
    serializer = AvroSerializer(client, Schema(json.dumps(CUSTOMER), "AVRO", AVRO_REFERENCES))
    records = [customer(i) for i in range(40)]
    values = serialized(serializer, "customers", records)
    produce_raw(typed.bootstrap, "customers", values, 0)
    registered = client.get_latest_version("customers-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references] == [
        ("geo.Address", "geo.Address", 1),
        ("geo.Country", "geo.Country", 1),
    ]

    df = typed.read("avro", subscribe="customers")
    assert dict(df.dtypes)["value"] == CUSTOMER_TYPE
    assert [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()] == records

    options = {"value.schema": json.dumps(CUSTOMER), "value.schema.references": AVRO_REFERENCES_OPTION}
    typed.write(df.select("value"), "customers-out", "avro", **options)
    written = client.get_latest_version("customers-out-value")
    assert written.schema_id == registered.schema_id  # the same schema with the same references: one id
    assert [(r.name, r.subject, r.version) for r in written.schema.references] == [
        ("geo.Address", "geo.Address", 1),
        ("geo.Country", "geo.Country", 1),
    ]
    assert raw_values(typed, "customers-out", 1) == values
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": typed.url}))
    assert typed.read_back("customers-out", 1, deserializer) == records

    # auto.register.schemas=false: the subject's latest version (with its references) is written
    typed.write(df.select("value"), "customers-out", "avro", **{"auto.register.schemas": "false"})
    assert raw_values(typed, "customers-out", 1) == values + values

    with pytest.raises(Exception, match=r"is not an Avro schema: .*needs option 'value.schema.references'"):
        typed.write(df.select("value"), "customers-again", "avro", **{"value.schema": json.dumps(CUSTOMER)})
    missing = json.dumps([{"name": "geo.Address", "subject": "geo.Address", "version": 7}])
    with pytest.raises(Exception, match=r"reference 'geo.Address' is named as subject geo.Address version 7"):
        typed.write(
            df.select("value"),
            "customers-again",
            "avro",
            **{"value.schema": json.dumps(CUSTOMER), "value.schema.references": missing},
        )
    with pytest.raises(SchemaRegistryError):
        client.get_latest_version("customers-again-value")  # nothing registered by the refused writes


def test_json_with_references_read_as_columns_and_written_back(spark, typed_broker):
    """Documents serialized by JSONSerializer with a schema whose $ref names another subject's
    document (by the URI it resolves to against the schema's $id) are read as typed columns; the
    sink registers the same text with value.schema.references and JSONDeserializer, resolving the
    reference through the registry, reads back exactly the documents produced."""
    typed, client = typed_broker, typed_broker.client
    typed.topics("people-json", "people-json-out")
    client.register_schema("address-json", Schema(json.dumps(ADDRESS_JSON), "JSON"))
    references = [SchemaReference(ADDRESS_URI, "address-json", 1)]
    serializer = JSONSerializer(Schema(json.dumps(CUSTOMER_JSON), "JSON", references), client)
    documents = [customer_json(i) for i in range(25)]
    produce_raw(typed.bootstrap, "people-json", serialized(serializer, "people-json", documents), 0)
    assert [r.name for r in client.get_latest_version("people-json-value").schema.references] == [ADDRESS_URI]

    df = typed.read("json", subscribe="people-json")
    assert dict(df.dtypes)["value"] == CUSTOMER_JSON_TYPE
    assert [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()] == documents

    option = json.dumps([{"name": ADDRESS_URI, "subject": "address-json"}])
    typed.write(
        df.select("value"),
        "people-json-out",
        "json",
        **{"value.schema": json.dumps(CUSTOMER_JSON), "value.schema.references": option},
    )
    written = client.get_latest_version("people-json-out-value")
    assert [(r.name, r.subject, r.version) for r in written.schema.references] == [(ADDRESS_URI, "address-json", 1)]
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": typed.url}))
    prefix = b"\x00" + written.schema_id.to_bytes(4, "big")
    assert typed.read_back("people-json-out", 1, deserializer, prefix) == documents


def test_avro_and_json_references_on_three_brokers(spark, typed_cluster):
    """On 3 brokers: the referenced subjects registered through broker 0's registry, records
    serialized through it, read as columns through broker 1's, written by the sink registering with
    references through broker 2's; the deserializers, through broker 1's, read back every record."""
    typed, urls = typed_cluster, typed_cluster.urls
    typed.topics("c-customers", "c-customers-out", "c-people", "c-people-out", partitions=3)
    through = [SchemaRegistryClient({"url": url}) for url in urls]
    register_avro_references(through[0])
    through[0].register_schema("address-json", Schema(json.dumps(ADDRESS_JSON), "JSON"))

    def seen_through_2() -> bool:
        try:
            return through[2].get_versions("address-json") == [1] and through[2].get_versions("geo.Address") == [1]
        except SchemaRegistryError:  # 40401 until broker 2 has read the registrations
            return False

    wait_for(seen_through_2, what="the referenced subjects through broker 2")
    records = [customer(i) for i in range(30)]
    avro = AvroSerializer(through[0], Schema(json.dumps(CUSTOMER), "AVRO", AVRO_REFERENCES))
    for p in range(3):
        produce_raw(typed.bootstrap, "c-customers", serialized(avro, "c-customers", records[p::3]), p)
    documents = [customer_json(i) for i in range(30)]
    references = [SchemaReference(ADDRESS_URI, "address-json", 1)]
    js = JSONSerializer(Schema(json.dumps(CUSTOMER_JSON), "JSON", references), through[0])
    for p in range(3):
        produce_raw(typed.bootstrap, "c-people", serialized(js, "c-people", documents[p::3]), p)

    customers = typed.read("avro", url=urls[1], subscribe="c-customers")
    assert dict(customers.dtypes)["value"] == CUSTOMER_TYPE
    options = {"value.schema": json.dumps(CUSTOMER), "value.schema.references": AVRO_REFERENCES_OPTION}
    typed.write(customers.select("partition", "value"), "c-customers-out", "avro", url=urls[2], **options)
    got = typed.read_back("c-customers-out", 3, AvroDeserializer(through[1]))
    assert sorted(got, key=lambda r: r["id"]) == records

    people = typed.read("json", url=urls[1], subscribe="c-people")
    assert dict(people.dtypes)["value"] == CUSTOMER_JSON_TYPE
    option = json.dumps([{"name": ADDRESS_URI, "subject": "address-json", "version": 1}])
    typed.write(
        people.select("partition", "value"),
        "c-people-out",
        "json",
        url=urls[2],
        **{"value.schema": json.dumps(CUSTOMER_JSON), "value.schema.references": option},
    )
    got = typed.read_back("c-people-out", 3, JSONDeserializer(None, schema_registry_client=through[1]))
    assert sorted(got, key=lambda d: d["id"]) == documents


def test_avro_and_json_references_over_sasl_ssl_with_registry_credentials(spark, tmp_path):
    """Through a SASL_SSL listener and a registry that asks for credentials: records with references
    read as typed columns and written back by the sink with value.schema.references; the
    deserializers, with the same credentials, read back each record."""
    from tests.spark.secured_broker import ALICE, sasl_ssl_broker
    from tests.spark.typed_support import TypedBroker

    with sasl_ssl_broker(tmp_path) as (broker, kafka):
        typed = TypedBroker.secured(spark, broker, kafka, ALICE)
        client = typed.client
        typed.topics("s-customers", "s-customers-out", "s-people", "s-people-out")
        register_avro_references(client)
        client.register_schema("address-json", Schema(json.dumps(ADDRESS_JSON), "JSON"))
        records = [customer(i) for i in range(12)]
        avro = AvroSerializer(client, Schema(json.dumps(CUSTOMER), "AVRO", AVRO_REFERENCES))
        values = serialized(avro, "s-customers", records)
        produce_raw(typed.bootstrap, "s-customers", values, 0)
        documents = [customer_json(i) for i in range(12)]
        references = [SchemaReference(ADDRESS_URI, "address-json", 1)]
        js = JSONSerializer(Schema(json.dumps(CUSTOMER_JSON), "JSON", references), client)
        produce_raw(typed.bootstrap, "s-people", serialized(js, "s-people", documents), 0)

        customers = typed.read("avro", subscribe="s-customers")
        options = {"value.schema": json.dumps(CUSTOMER), "value.schema.references": AVRO_REFERENCES_OPTION}
        typed.write(customers.select("value"), "s-customers-out", "avro", **options)
        assert raw_values(typed, "s-customers-out", 1) == values
        assert typed.read_back("s-customers-out", 1, AvroDeserializer(client)) == records

        people = typed.read("json", subscribe="s-people")
        option = json.dumps([{"name": ADDRESS_URI, "subject": "address-json"}])
        typed.write(
            people.select("value"),
            "s-people-out",
            "json",
            **{"value.schema": json.dumps(CUSTOMER_JSON), "value.schema.references": option},
        )
        got = typed.read_back("s-people-out", 1, JSONDeserializer(None, schema_registry_client=client))
        assert got == documents
