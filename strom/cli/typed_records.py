"""Avro records in the console tools, as Confluent's kafka-avro-console-producer and -consumer.

``--value-format avro`` (and ``--key-format avro``) with ``--property schema.registry.url=URL``:

- the producer reads each value (key) as JSON in Avro's JSON encoding (a union's value is written
  ``{"string": "x"}``, null as ``null``) and sends it in Confluent's wire format: magic byte 0, the
  schema id (4 bytes, big-endian), the Avro binary body. The schema is ``--property
  value.schema=JSON`` (or ``value.schema.file=PATH``), registered under ``<topic>-value`` as
  Confluent's serializer registers it (an existing identical schema keeps its id), or
  ``--property value.schema.id=N``, a schema already registered. ``key.schema...`` alike.
- the consumer reads the id of each record, fetches that schema from the registry once, and
  prints the record as JSON in Avro's JSON encoding, with the formatter's other columns as usual.
  A record without the prefix ends the consumer with an error, as Confluent's does.

A registry that asks for HTTP Basic credentials gets ``--property basic.auth.user.info=USER:PASSWORD``;
one served over https with a private CA, ``--property schema.registry.ssl.ca.location=PEM``.
JSON Schema and Protobuf are not implemented yet.
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

FORMATS = ("string", "avro")
_PREFIX = struct.Struct(">bI")
TIMEOUT_S = 30.0


def add_format_arguments(parser, verb: str) -> None:
    parser.add_argument(
        "--value-format",
        choices=FORMATS,
        default="string",
        help=f"avro: {verb} values as JSON through Avro (needs --property schema.registry.url=URL)",
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
        raise ToolError("--value-format/--key-format avro needs --property schema.registry.url=URL")
    ca_file = props.get("schema.registry.ssl.ca.location")
    try:
        return RegistryClient(url, TIMEOUT_S, props.get("basic.auth.user.info"), ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"schema.registry.ssl.ca.location {ca_file}: {exc}") from None


def encoder(props: dict[str, str], topic: str, side: str) -> Callable[[bytes | None, int], bytes | None]:
    """For the producer: JSON text (as bytes) -> Confluent's Avro wire format, with ``side``'s schema."""
    import fastavro

    registry = _registry(props)
    text = props.get(f"{side}.schema")
    path = props.get(f"{side}.schema.file")
    given_id = props.get(f"{side}.schema.id")
    if sum(x is not None for x in (text, path, given_id)) != 1:
        raise ToolError(f"avro {side}s need one of --property {side}.schema=, {side}.schema.file= or {side}.schema.id=")
    if given_id is not None:
        try:
            schema_id = int(given_id)
        except ValueError:
            raise ToolError(f"{side}.schema.id must be an integer, got {given_id!r}") from None
        found = registry.call("GET", f"/schemas/ids/{schema_id}")
        if found.get("schemaType", "AVRO") != "AVRO":
            raise ToolError(f"schema {schema_id} is {found.get('schemaType')}, not AVRO")
        text = found["schema"]
    else:
        if path is not None:
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError as exc:
                raise ToolError(f"cannot read {path}: {exc.strerror}") from None
        assert text is not None
        _parsed(text)  # a schema that does not parse is refused here, before the registry sees it
        subject = f"{topic}-{side}"
        schema_id = registry.call("POST", f"/subjects/{subject}/versions", {"schema": text})["id"]
    schema = _parsed(text)
    prefix = _PREFIX.pack(0, schema_id)

    def encode(data: bytes | None, line_number: int) -> bytes | None:
        if data is None:
            return None
        try:
            record = next(iter(fastavro.json_reader(io.StringIO(data.decode("utf-8")), schema)))
            out = io.BytesIO()
            out.write(prefix)
            fastavro.schemaless_writer(out, schema, record)
        except (ValueError, TypeError, KeyError, AttributeError, StopIteration) as exc:
            raise ToolError(f"line {line_number}: the {side} is not a record of schema {schema_id}: {exc}") from None
        return out.getvalue()

    return encode


def decoder(props: dict[str, str], side: str) -> Callable[[bytes], bytes]:
    """For the consumer: Confluent's Avro wire format -> JSON (Avro's JSON encoding) as bytes."""
    import fastavro

    registry = _registry(props)
    schemas: dict[int, Any] = {}

    def decode(data: bytes) -> bytes:
        if len(data) < _PREFIX.size or data[0] != 0:
            raise ToolError(f"Unknown magic byte! (a {side} without Confluent's schema id prefix)")
        schema_id = _PREFIX.unpack_from(data)[1]
        schema = schemas.get(schema_id)
        if schema is None:
            schema = schemas[schema_id] = _parsed(registry.call("GET", f"/schemas/ids/{schema_id}")["schema"])
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[_PREFIX.size :]), schema, None)
        except (ValueError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise ToolError(f"a {side} does not decode with schema {schema_id}: {exc}") from None
        out = io.StringIO()
        fastavro.json_writer(out, schema, [record])
        return out.getvalue().strip().encode("utf-8")

    return decode
