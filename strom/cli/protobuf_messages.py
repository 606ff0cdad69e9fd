"""Protobuf message classes from a Schema Registry, for the console tools (``--value-format protobuf``).

A schema is fetched as confluent-kafka's deserializer fetches it: ``?format=serialized`` gives its
``FileDescriptorProto`` (base64), its references each the same way by subject and version (their
import names from the reference), and the well-known types ``google/protobuf/*.proto`` come from
the protobuf package. A record names its message by Confluent's message indexes after the schema
id: a zigzag varint count, then that many zigzag varint indexes (a single 0 byte: the first message),
a path through the file's messages and their nested messages.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass

from strom.cli.client_props import ToolError
from strom.cli.schemas import RegistryClient
from strom.iceberg.protobuf_columns import message_indexes
from strom.schemas.protobuf import WELL_KNOWN


def _descriptor(answer: dict[str, Any], name: str) -> Any:
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    except Exception as exc:  # binascii.Error, DecodeError: not a serialized descriptor
        raise ToolError(f"the registry's serialized form of {name} is not a descriptor: {exc}") from None
    file.name = name
    return file


class ProtobufSchema:
    """The messages of the schema ``schema_id``, with the pool that resolves them."""

    def __init__(self, registry: RegistryClient, schema_id: int):
        self.schema_id = schema_id
        self.pool = DescriptorPool()
        added: set[str] = set()
        for name in WELL_KNOWN:
            self._add_well_known(name, added)
        answer = registry.call("GET", f"/schemas/ids/{schema_id}", query={"format": "serialized"})
        if answer.get("schemaType") != "PROTOBUF":
            raise ToolError(f"schema {schema_id} is {answer.get('schemaType', 'AVRO')}, not PROTOBUF")
        self._add_references(registry, answer.get("references") or [], set())
        self.file = _descriptor(answer, f"schema-{schema_id}.proto")
        try:
            self.pool.Add(self.file)
        except TypeError as exc:
            raise ToolError(f"schema {schema_id} does not build: {exc}") from None
        if not self.file.message_type:
            raise ToolError(f"schema {schema_id} has no message")
        self._classes: dict[tuple[int, ...], Any] = {}

    def _add_well_known(self, name: str, added: set[str]) -> None:
        if name in added:
            return
        added.add(name)
        descriptor = WELL_KNOWN[name]
        for dependency in descriptor.dependencies:
            self._add_well_known(dependency.name, added)
        self.pool.AddSerializedFile(descriptor.serialized_pb)

    def _add_references(self, registry: RegistryClient, references: list, seen: set[str]) -> None:
        for reference in references:
            name = reference["name"]
            if name in seen or name in WELL_KNOWN:
                continue
            seen.add(name)
            path = f"/subjects/{quote(reference['subject'], safe='')}/versions/{reference['version']}"
            answer = registry.call("GET", path, query={"format": "serialized"})
            self._add_references(registry, answer.get("references") or [], seen)
            self.pool.Add(_descriptor(answer, name))

    def message_class(self, indexes: tuple[int, ...] = (0,)) -> Any:
        """The class of the message the indexes name (the first message by default)."""
        found = self._classes.get(indexes)
        if found is not None:
            return found
        try:
            top = self.file.message_type[indexes[0]]
            full = f"{self.file.package}.{top.name}" if self.file.package else top.name
            descriptor = self.pool.FindMessageTypeByName(full)
            for index in indexes[1:]:
                descriptor = descriptor.nested_types[index]
        except (IndexError, KeyError):
            raise ToolError(f"schema {self.schema_id} has no message at indexes {list(indexes)}") from None
        found = self._classes[indexes] = GetMessageClass(descriptor)
        return found

    def to_json(self, data: bytes, indent: int | None = None, ensure_ascii: bool = True) -> str:
        """A record's body (message indexes, then the message) in protobuf's JSON mapping with the
        fields' proto names: what the console consumer prints and the web console shows."""
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        indexes, position = read_indexes(data, 0)
        message = self.message_class(indexes)()
        try:
            message.ParseFromString(data[position:])
        except DecodeError as exc:
            raise ToolError(str(exc)) from None
        return json_format.MessageToJson(
            message, indent=indent, preserving_proto_field_name=True, ensure_ascii=ensure_ascii
        )


def read_indexes(data: bytes, position: int) -> tuple[tuple[int, ...], int]:
    """Confluent's message indexes at ``position``: (indexes, the position after them); the one
    parser of them, ``strom.iceberg.protobuf_columns.message_indexes``, with a ToolError."""
    try:
        return message_indexes(data, position)
    except (IndexError, ValueError) as exc:
        raise ToolError(f"a record's message indexes do not decode: {exc or 'they run past its end'}") from None
