"""The records of the ``_schemas`` topic, in the format Confluent Schema Registry writes them.

Keys and values are JSON. Keys are written with Confluent's field order, so that a later record
of the same key (a tombstone, a soft delete) has the same bytes and compaction keeps only it:

- ``{"keytype":"SCHEMA","subject":S,"version":N,"magic":1}`` → ``{"subject","version","id","schema",
  "schemaType","references","deleted"}``; a soft delete writes the value again with
  ``"deleted":true``, a permanent delete a tombstone (null value).
- ``{"keytype":"CONFIG","subject":S|null,"magic":0}`` → ``{"compatibilityLevel":LEVEL}``; null
  subject is the global level; a tombstone removes a subject's level.
- ``{"keytype":"MODE","subject":S|null,"magic":0}`` → ``{"mode":MODE}``.
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` → ``{"subject":S,"version":N}``: every
  version up to N of S is soft-deleted.
- ``{"keytype":"NOOP","magic":0}``: Confluent's leader writes it to sync its reader; ignored.
  strom gives it a value ``{"maxId":N}`` when a permanent delete removes the highest id, so that
  an id is never handed out twice, even after compaction dropped the last record that named it.

Other key types (CLEAR_SUBJECT, CONTEXT) are skipped with a warning by the reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMAS_TOPIC = "_schemas"


class RecordFormatError(ValueError):
    pass


@dataclass(frozen=True)
class SchemaKey:
    subject: str
    version: int


@dataclass(frozen=True)
class ConfigKey:
    subject: str | None


@dataclass(frozen=True)
class ModeKey:
    subject: str | None


@dataclass(frozen=True)
class DeleteSubjectKey:
    subject: str


@dataclass(frozen=True)
class NoopKey:
    pass


Key = SchemaKey | ConfigKey | ModeKey | DeleteSubjectKey | NoopKey


@dataclass
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)
    deleted: bool = False


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def encode_key(key: Key) -> bytes:
    if isinstance(key, SchemaKey):
        return _dump({"keytype": "SCHEMA", "subject": key.subject, "version": key.version, "magic": 1})
    if isinstance(key, ConfigKey):
        return _dump({"keytype": "CONFIG", "subject": key.subject, "magic": 0})
    if isinstance(key, ModeKey):
        return _dump({"keytype": "MODE", "subject": key.subject, "magic": 0})
    if isinstance(key, DeleteSubjectKey):
        return _dump({"keytype": "DELETE_SUBJECT", "subject": key.subject, "magic": 0})
    return _dump({"keytype": "NOOP", "magic": 0})


def encode_schema_value(value: SchemaValue) -> bytes:
    return _dump(
        {
            "subject": value.subject,
            "version": value.version,
            "id": value.id,
            "schema": value.schema,
            "schemaType": value.schema_type,
            "references": value.references,
            "deleted": value.deleted,
        }
    )


def encode_config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def encode_mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def encode_delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def encode_noop_value(max_id: int) -> bytes:
    return _dump({"maxId": max_id})


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordFormatError(f"{what} is not a JSON object")
    return value


def _subject(value: dict[str, Any], nullable: bool) -> Any:
    subject = value.get("subject")
    if subject is None and nullable:
        return None
    if not isinstance(subject, str):
        raise RecordFormatError(f"subject {subject!r} is not a string")
    return subject


def _int(value: dict[str, Any], name: str) -> int:
    found = value.get(name)
    if not isinstance(found, int) or isinstance(found, bool):
        raise RecordFormatError(f"{name} {found!r} is not an integer")
    return found


def decode_key(raw: bytes) -> Key:
    value = _object(raw, "key")
    keytype = value.get("keytype")
    if keytype == "SCHEMA":
        return SchemaKey(_subject(value, False), _int(value, "version"))
    if keytype == "CONFIG":
        return ConfigKey(_subject(value, True))
    if keytype == "MODE":
        return ModeKey(_subject(value, True))
    if keytype == "DELETE_SUBJECT":
        return DeleteSubjectKey(_subject(value, False))
    if keytype == "NOOP":
        return NoopKey()
    raise RecordFormatError(f"unknown keytype {keytype!r}")


def decode_schema_value(raw: bytes) -> SchemaValue:
    value = _object(raw, "schema value")
    schema = value.get("schema")
    if not isinstance(schema, str):
        raise RecordFormatError("schema value has no schema string")
    references = value.get("references") or []
    if not isinstance(references, list):
        raise RecordFormatError("references is not a list")
    return SchemaValue(
        subject=_subject(value, False),
        version=_int(value, "version"),
        id=_int(value, "id"),
        schema=schema,
        schema_type=str(value.get("schemaType") or "AVRO"),
        references=references,
        deleted=bool(value.get("deleted", False)),
    )


def decode_config_value(raw: bytes) -> str:
    level = _object(raw, "config value").get("compatibilityLevel")
    if not isinstance(level, str):
        raise RecordFormatError(f"compatibilityLevel {level!r} is not a string")
    return level


def decode_mode_value(raw: bytes) -> str:
    mode = _object(raw, "mode value").get("mode")
    if not isinstance(mode, str):
        raise RecordFormatError(f"mode {mode!r} is not a string")
    return mode


def decode_delete_subject_value(raw: bytes) -> int:
    return _int(_object(raw, "delete-subject value"), "version")


def decode_noop_value(raw: bytes) -> int:
    try:
        found = _object(raw, "noop value").get("maxId")
    except RecordFormatError:
        return 0
    return found if isinstance(found, int) and not isinstance(found, bool) else 0
