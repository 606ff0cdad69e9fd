"""The console's view of a Schema Registry: subjects, versions side by side, and decoded records.

Any registry that speaks Confluent's REST API will do (strom's own, or Confluent's), so the console
only uses that API, through the same small client as ``strom schemas``. Schemas are immutable once
registered, so the ids the message browser meets are fetched once and kept for the console's life.

A record is decoded when its bytes start with Confluent's prefix (magic byte 0 and a 4-byte id)
and the id names a schema the registry knows: Avro bodies are read with that schema, JSON Schema
bodies are JSON already, Protobuf bodies are read as the message their indexes name (the same
classes as ``strom console-consumer --value-format protobuf``, ``strom.cli.protobuf_messages``)
and shown in protobuf's JSON mapping with the fields' proto names; anything else (an unknown id,
a body that does not decode) is shown as the browser shows any bytes, so a page never fails on
one bad record.
"""

from __future__ import annotations

import difflib
import io
import json
import struct
import threading
from dataclasses import dataclass
from typing import Any

from strom.cli.client_props import ToolError
from strom.cli.schemas import RegistryClient
from strom.console.render import Shown

PREFIX = struct.Struct(">bI")
NOT_FOUND = object()


@dataclass(frozen=True)
class SubjectRow:
    name: str
    latest_version: int
    schema_id: int
    schema_type: str
    compatibility: str


@dataclass(frozen=True)
class VersionView:
    version: int
    schema_id: int
    schema_type: str
    text: str  # pretty-printed when it is JSON (Avro and JSON Schema), as registered otherwise
    references: list[dict[str, Any]]


class SchemaBrowser:
    """What the Schemas pages and the message browser ask of the registry at ``url``.

    ``user_info`` (``USER:PASSWORD``) logs in to a registry that asks for HTTP Basic credentials:
    strom's checks them against the brokers' SCRAM users, so the console passes the SASL login of
    its --command-config. ``ca_file`` checks an https registry's certificate.
    """

    def __init__(self, url: str, timeout_s: float, user_info: str | None = None, ca_file: str | None = None):
        self.url = url
        self.client = RegistryClient(url, timeout_s, user_info, ca_file)
        self._by_id: dict[int, Any] = {}  # id -> (type, parsed schema) or NOT_FOUND
        self._lock = threading.Lock()

    def subjects(self) -> list[SubjectRow]:
        rows = []
        for name in sorted(self.client.call("GET", "/subjects")):
            latest = self.client.call("GET", f"/subjects/{_quoted(name)}/versions/latest")
            rows.append(
                SubjectRow(
                    name,
                    latest["version"],
                    latest["id"],
                    latest.get("schemaType", "AVRO"),
                    self.compatibility(name),
                )
            )
        return rows

    def compatibility(self, subject: str) -> str:
        found = self.client.call("GET", f"/config/{_quoted(subject)}", query={"defaultToGlobal": "true"})
        return found["compatibilityLevel"]

    def versions(self, subject: str) -> list[int]:
        return list(self.client.call("GET", f"/subjects/{_quoted(subject)}/versions"))

    def version(self, subject: str, version: int | str) -> VersionView:
        found = self.client.call("GET", f"/subjects/{_quoted(subject)}/versions/{version}")
        schema_type = found.get("schemaType", "AVRO")
        return VersionView(
            found["version"], found["id"], schema_type, pretty(found["schema"]), found.get("references", [])
        )

    def decode(self, data: bytes | None) -> Shown | None:
        """The record's value (or key) as JSON when it carries a schema id this registry knows."""
        if data is None or len(data) < PREFIX.size or data[0] != 0:
            return None
        schema_id = PREFIX.unpack_from(data)[1]
        known = self._schema(schema_id)
        if known is NOT_FOUND:
            return None
        schema_type, parsed = known
        body = data[PREFIX.size :]
        try:
            if schema_type == "AVRO" and parsed is not None:
                import fastavro

                record = fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
                text = json.dumps(record, indent=2, ensure_ascii=False, default=_plain)
            elif schema_type == "JSON":
                text = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
            elif schema_type == "PROTOBUF" and parsed is not None:
                text = parsed.to_json(body, indent=2, ensure_ascii=False)
            else:
                return None
        except (ValueError, EOFError, IndexError, TypeError, UnicodeDecodeError, ToolError):
            return None
        return Shown(schema_type.lower(), text, len(data), schema_id)

    def _schema(self, schema_id: int) -> Any:
        with self._lock:
            if schema_id in self._by_id:
                return self._by_id[schema_id]
        try:
            found = self.client.call("GET", f"/schemas/ids/{schema_id}")
        except ToolError as exc:
            if "40403" not in str(exc):  # the registry is down or refuses us: ask again next page
                return NOT_FOUND
            known: Any = NOT_FOUND
        else:
            schema_type = found.get("schemaType", "AVRO")
            known = (
                schema_type,
                self._protobuf(schema_id) if schema_type == "PROTOBUF" else _parse(schema_type, found["schema"]),
            )
        with self._lock:
            self._by_id[schema_id] = known
        return known

    def _protobuf(self, schema_id: int) -> Any:
        """The message classes of a Protobuf schema (None when they do not build: its records show as bytes)."""
        from strom.cli.protobuf_messages import ProtobufSchema

        try:
            return ProtobufSchema(self.client, schema_id)
        except ToolError:
            return None


def side_by_side(older: VersionView, newer: VersionView) -> str:
    """An HTML table of two versions' texts, changed lines marked (difflib escapes the text)."""
    table = difflib.HtmlDiff(wrapcolumn=70).make_table(
        older.text.splitlines(),
        newer.text.splitlines(),
        f"version {older.version} (id {older.schema_id})",
        f"version {newer.version} (id {newer.schema_id})",
    )
    return table.replace(' nowrap="nowrap"', "")


def pretty(schema_text: str) -> str:
    try:
        return json.dumps(json.loads(schema_text), indent=2, ensure_ascii=False)
    except ValueError:  # Protobuf's .proto text
        return schema_text


def _parse(schema_type: str, text: str) -> Any:
    if schema_type != "AVRO":
        return None
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, KeyError):
        return None


def _plain(value: Any) -> Any:
    """JSON for what Avro decodes to beyond JSON's types: bytes, decimals, dates and times."""
    if isinstance(value, bytes):
        return value.hex(" ")
    return str(value)


def _quoted(subject: str) -> str:
    from urllib.parse import quote

    return quote(subject, safe="")
