"""The registry's view: what replaying ``_schemas`` says, last record of a key winning.

Pure and synchronous: ``apply(key, value)`` per record in offset order; the queries answer the
REST API's reads. Every broker that serves the registry holds one, built from its replica.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from strom.schemas import formats, protobuf_indexes
from strom.schemas import records as rec

log = logging.getLogger("strom.schemas")

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class StoredSchema:
    """A schema as ids name it: the same text, type and references get the same id."""

    schema: str
    schema_type: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)

    def references_json(self) -> list[dict]:
        return [{"name": n, "subject": s, "version": v} for n, s, v in self.references]


def references_of(raw: list) -> tuple[tuple[str, str, int], ...]:
    return tuple((str(r.get("name")), str(r.get("subject")), int(r.get("version", 0))) for r in raw)


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, rec.SchemaValue]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0  # the highest id any record ever named: the next is above it
        self._ids: dict[int, StoredSchema] | None = None  # id -> schema, rebuilt lazily after changes
        self._by_schema: dict[StoredSchema, int] | None = None
        self._id_subjects: dict[int, frozenset[str]] | None = None  # produce-side validation's cache
        self._record_names: dict[int, str | None] = {}
        self._message_names: dict[int, dict[tuple[int, ...], str] | None] = {}  # Protobuf ids' paths

    # -- replay -------------------------------------------------------------------------------------
    def apply(self, key: rec.Key, value: bytes | None) -> None:
        if isinstance(key, rec.SchemaKey):
            versions = self.subjects.setdefault(key.subject, {})
            if value is None:
                versions.pop(key.version, None)
                if not versions:
                    del self.subjects[key.subject]
            else:
                stored = rec.decode_schema_value(value)
                versions[key.version] = stored
                self.max_id = max(self.max_id, stored.id)
            self._ids = self._by_schema = None
            self._id_subjects = None
            self._record_names.clear()
            self._message_names.clear()
        elif isinstance(key, rec.ConfigKey):
            self._set(self.configs, key.subject, None if value is None else rec.decode_config_value(value))
        elif isinstance(key, rec.ModeKey):
            self._set(self.modes, key.subject, None if value is None else rec.decode_mode_value(value))
        elif isinstance(key, rec.DeleteSubjectKey):
            if value is not None:
                upto = rec.decode_delete_subject_value(value)
                for version, stored in self.subjects.get(key.subject, {}).items():
                    if version <= upto:
                        stored.deleted = True
                self._id_subjects = None
        elif isinstance(key, rec.NoopKey) and value is not None:
            self.max_id = max(self.max_id, rec.decode_noop_value(value))

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, value: str | None) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    # -- queries ------------------------------------------------------------------------------------
    def _index(self) -> tuple[dict[int, StoredSchema], dict[StoredSchema, int]]:
        if self._ids is None or self._by_schema is None:
            ids: dict[int, StoredSchema] = {}
            for versions in self.subjects.values():
                for stored in versions.values():
                    ids.setdefault(stored.id, self.stored(stored))
            self._ids = ids
            self._by_schema = {schema: schema_id for schema_id, schema in sorted(ids.items(), reverse=True)}
        return self._ids, self._by_schema

    @staticmethod
    def stored(value: rec.SchemaValue) -> StoredSchema:
        return StoredSchema(value.schema, value.schema_type, references_of(value.references))

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        return self._index()[0].get(schema_id)

    def id_of(self, schema: StoredSchema) -> int | None:
        return self._index()[1].get(schema)

    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None:
        """The subjects with a live (not soft-deleted) version of the schema ``schema_id``; None for
        an id no live version has. A dictionary rebuilt after a change, so that validating a
        produced record costs a lookup."""
        table = self._id_subjects
        if table is None:
            found: dict[int, set[str]] = {}
            for subject, versions in self.subjects.items():
                for stored in versions.values():
                    if not stored.deleted:
                        found.setdefault(stored.id, set()).add(subject)
            table = self._id_subjects = {schema_id: frozenset(names) for schema_id, names in found.items()}
        return table.get(schema_id)

    def record_name_of_id(self, schema_id: int) -> str | None:
        """RecordNameStrategy's subject of the schema ``schema_id``: an Avro record's full name, a
        JSON schema's title, a Protobuf schema's first message; None when it has none."""
        if schema_id not in self._record_names:
            stored = self.schema_by_id(schema_id)
            self._record_names[schema_id] = (
                None if stored is None else formats.record_name(stored.schema_type, stored.schema)
            )
        return self._record_names[schema_id]

    def is_protobuf_id(self, schema_id: int) -> bool:
        stored = self.schema_by_id(schema_id)
        return stored is not None and stored.schema_type == "PROTOBUF"

    def message_name_of_id(self, schema_id: int, indexes: tuple[int, ...]) -> str | None:
        """The full name of the message at ``indexes`` (Confluent's message indexes) of the Protobuf
        schema ``schema_id``; None when there is none. Each id's paths are listed once."""
        if schema_id not in self._message_names:
            stored = self.schema_by_id(schema_id)
            self._message_names[schema_id] = (
                protobuf_indexes.message_names(stored.schema)
                if stored is not None and stored.schema_type == "PROTOBUF"
                else None
            )
        names = self._message_names[schema_id]
        return None if names is None else names.get(indexes)

    def versions(self, subject: str, deleted: bool = False) -> list[rec.SchemaValue]:
        """The subject's versions, oldest first; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def usages(self, schema_id: int, deleted: bool = False) -> list[rec.SchemaValue]:
        return [
            stored
            for subject in sorted(self.subjects)
            for stored in self.versions(subject, deleted)
            if stored.id == schema_id
        ]

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: str | None) -> str:
        """The mode in force for ``subject``: its own, else the global one; a global
        READONLY_OVERRIDE wins over every subject's own mode (Confluent's getModeInScope)."""
        if self.modes.get(None) == "READONLY_OVERRIDE":
            return "READONLY_OVERRIDE"
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)
