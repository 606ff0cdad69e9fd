"""Typed records in the console tools, as Confluent's kafka-avro-, kafka-json-schema- and
kafka-protobuf-console-producer and -consumer.

``--value-format avro|json|protobuf`` (and ``--key-format``) with ``--property schema.registry.url=URL``:

- the producer reads each value (key) as JSON and sends it in Confluent's wire format: magic byte
  0, the schema id (4 bytes, big-endian), then the body: Avro binary (the JSON in Avro's JSON
  encoding: a union's value is written ``{"string": "x"}``, null as ``null``), the JSON itself
  (checked against the JSON Schema first, with ``jsonschema``), or Protobuf binary after the
  message indexes (the JSON in protobuf's JSON mapping, into the schema's first message). The
  schema is ``--property value.schema=TEXT`` (or ``value.schema.file=PATH``), registered under
  ``<topic>-value`` as Confluent's serializers register it (an existing identical schema keeps its
  id), or ``--property value.schema.id=N``, a schema already registered. ``key.schema...`` alike.
- the consumer reads the id of each record, fetches that schema from the registry once, and
  prints the record as JSON (Avro's JSON encoding; the JSON as it is; protobuf's JSON mapping with
  the fields' proto names), with the formatter's other columns as usual. A record without the
  prefix ends the consumer with an error, as Confluent's does.

A registry that asks for HTTP Basic credentials gets ``--property basic.auth.user.info=USER:PASSWORD``;
one served over https with a private CA, ``--property schema.registry.ssl.ca.location=PEM``.
"""

from __future__ import annotations

import io
import json
import ssl
import struct
from collections.abc import Callable
from typing import Any

from strom.cli.client_props import ToolError
from strom.cli.schemas import RegistryClient

FORMATS = ("string", "avro", "json", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
_PREFIX = struct.Struct(">bI")
TIMEOUT_S = 30.0


def add_format_arguments(parser, verb: str) -> None:
    parser.add_argument(
        "--value-format",
        choices=FORMATS,
        default="string",
        help=f"avro, json, protobuf: {verb} values as JSON through a schema (needs --property schema.registry.url=URL)",
    )
    parser.add_argument("--key-format", choices=FORMATS, default="string", help="as --value-format, for keys")


def _parsed(schema_text: str) -> Any:
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(schema_text))
    except (ValueError, TypeError, KeyError) as exc:  # fastavro's SchemaParseException is a ValueError
        raise ToolError(f"the schema does not parse: {exc}") from None


def _registry(props: dict[str, str]) -> RegistryClient:
    url = props.get("schema.registry.url")
    if not url:
        raise ToolError("--value-format/--key-format avro, json or protobuf needs --property schema.registry.url=URL")
    ca_file = props.get("schema.registry.ssl.ca.location")
    try:
        return RegistryClient(url, TIMEOUT_S, props.get("basic.auth.user.info"), ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"schema.registry.ssl.ca.location {ca_file}: {exc}") from None


def _schema(props: dict[str, str], registry: RegistryClient, topic: str, side: str, fmt: str) -> tuple[int, str]:
    """(id, text) of the producer's schema: named by ``<side>.schema.id``, or given as text (or a
    file) and registered under ``<topic>-<side>``."""
    text = props.get(f"{side}.schema")
    path = props.get(f"{side}.schema.file")
    given_id = props.get(f"{side}.schema.id")
    if sum(x is not None for x in (text, path, given_id)) != 1:
        raise ToolError(
            f"{fmt} {side}s need one of --property {side}.schema=, {side}.schema.file= or {side}.schema.id="
        )
    schema_type = SCHEMA_TYPES[fmt]
    if given_id is not None:
        try:
            schema_id = int(given_id)
        except ValueError:
            raise ToolError(f"{side}.schema.id must be an integer, got {given_id!r}") from None
        found = registry.call("GET", f"/schemas/ids/{schema_id}")
        if found.get("schemaType", "AVRO") != schema_type:
            raise ToolError(f"schema {schema_id} is {found.get('schemaType', 'AVRO')}, not {schema_type}")
        return schema_id, found["schema"]
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    assert text is not None
    if fmt == "avro":
        _parsed(text)  # a schema that does not parse is refused here, before the registry sees it
    body = {"schema": text} if fmt == "avro" else {"schema": text, "schemaType": schema_type}
    return registry.call("POST", f"/subjects/{topic}-{side}/versions", body)["id"], text


def encoder(
    props: dict[str, str], topic: str, side: str, fmt: str = "avro"
) -> Callable[[bytes | None, int], bytes | None]:
    """For the producer: JSON text (as bytes) -> Confluent's wire format, with ``side``'s schema."""
    registry = _registry(props)
    schema_id, text = _schema(props, registry, topic, side, fmt)
    prefix = _PREFIX.pack(0, schema_id)
    body = {"avro": _avro_body, "json": _json_body, "protobuf": _protobuf_body}[fmt](registry, schema_id, text)

    def encode(data: bytes | None, line_number: int) -> bytes | None:
        if data is None:
            return None
        try:
            return prefix + body(data.decode("utf-8"))
        except ToolError as exc:
            raise ToolError(f"line {line_number}: the {side} is not a record of schema {schema_id}: {exc}") from None

    return encode


def _avro_body(registry: RegistryClient, schema_id: int, text: str) -> Callable[[str], bytes]:
    import fastavro

    schema = _parsed(text)

    def body(line: str) -> bytes:
        try:
            record = next(iter(fastavro.json_reader(io.StringIO(line), schema)))
            out = io.BytesIO()
            fastavro.schemaless_writer(out, schema, record)
        except (ValueError, TypeError, KeyError, AttributeError, StopIteration) as exc:
            raise ToolError(str(exc)) from None
        return out.getvalue()

    return body


def _json_body(registry: RegistryClient, schema_id: int, text: str) -> Callable[[str], bytes]:
    from jsonschema import validators

    try:
        schema = json.loads(text)
        validator = validators.validator_for(schema)(schema)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ToolError(f"the schema does not parse: {exc}") from None

    def body(line: str) -> bytes:
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ToolError(f"not JSON: {exc}") from None
        problem = next(iter(validator.iter_errors(value)), None)
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(root)"
            raise ToolError(f"at {where}: {problem.message}")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    return body


def _protobuf_body(registry: RegistryClient, schema_id: int, text: str) -> Callable[[str], bytes]:
    from google.protobuf import json_format

    from strom.cli.protobuf_messages import ProtobufSchema

    message_class = ProtobufSchema(registry, schema_id).message_class()

    def body(line: str) -> bytes:
        try:
            message = json_format.Parse(line, message_class())
        except json_format.ParseError as exc:
            raise ToolError(str(exc)) from None
        return b"\x00" + message.SerializeToString()  # message indexes [0]: the first message

    return body


def decoder(props: dict[str, str], side: str) -> Callable[[bytes], bytes]:
    """For the consumer: Confluent's wire format -> JSON as bytes, whatever the schema's type."""
    registry = _registry(props)
    decoders: dict[int, Callable[[bytes], str]] = {}

    def decode(data: bytes) -> bytes:
        if len(data) < _PREFIX.size or data[0] != 0:
            raise ToolError(f"Unknown magic byte! (a {side} without Confluent's schema id prefix)")
        schema_id = _PREFIX.unpack_from(data)[1]
        body = decoders.get(schema_id)
        if body is None:
            found = registry.call("GET", f"/schemas/ids/{schema_id}")
            kind = found.get("schemaType", "AVRO")
            if kind == "AVRO":
                body = _avro_reader(_parsed(found["schema"]))
            elif kind == "JSON":
                body = _json_reader
            else:
                body = _protobuf_reader(registry, schema_id)
            decoders[schema_id] = body
        try:
            return body(data[_PREFIX.size :]).encode("utf-8")
        except ToolError as exc:
            raise ToolError(f"a {side} does not decode with schema {schema_id}: {exc}") from None

    return decode


def _avro_reader(schema: Any) -> Callable[[bytes], str]:
    import fastavro

    def body(data: bytes) -> str:
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data), schema, None)
        except (ValueError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise ToolError(str(exc)) from None
        out = io.StringIO()
        fastavro.json_writer(out, schema, [record])
        return out.getvalue().strip()

    return body


def _json_reader(data: bytes) -> str:
    try:
        return json.dumps(json.loads(data), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolError(f"not JSON: {exc}") from None


def _protobuf_reader(registry: RegistryClient, schema_id: int) -> Callable[[bytes], str]:
    from strom.cli.protobuf_messages import ProtobufSchema

    return ProtobufSchema(registry, schema_id).to_json
