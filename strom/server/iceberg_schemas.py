"""What an Iceberg topic's translation round in a schema mode is told of the Schema Registry.

The translator's worker is another process: it gets plain data (``SchemaSet``), built here on the
event loop from this broker's view of ``_schemas`` (the same view produce-side validation asks),
never the live registry. ``settled`` says whether the view has read everything this broker's
replica of ``_schemas`` holds; while it has not, a record naming an id the view lacks waits for a
later round instead of going to the dead-letter table (its registration may be in flight here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strom.iceberg.schema_modes import RegisteredSchema, SchemaSet

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.replica_manager import ReplicaManager
    from strom.schemas.registry import SchemaRegistry
    from strom.schemas.state import RegistryState

SCHEMAS_KEY = ("_schemas", 0)


def schema_set(
    registry: SchemaRegistry, replicas: ReplicaManager, metadata: MetadataCache, topic: str, subject: str | None = None
) -> SchemaSet:
    """Every schema the view holds by id (soft-deleted versions too: records written before the
    deletion still decode), the latest live version of ``subject`` (value_schema_latest's option;
    by default ``<topic>-value``) and whether the view is settled."""
    next_offset = registry.catch_up()
    partition = replicas.partitions.get(SCHEMAS_KEY)
    if partition is None:
        settled = SCHEMAS_KEY[0] not in metadata.topics  # no registry topic anywhere: no id exists
    else:
        settled = next_offset >= partition.log.log_end_offset
    state = registry.state
    by_id: dict[int, RegisteredSchema] = {}
    for versions in state.subjects.values():
        for stored in versions.values():
            if stored.id not in by_id:
                by_id[stored.id] = RegisteredSchema(
                    stored.schema_type,
                    stored.schema,
                    tuple(text for _, text in _referenced(state, stored.references, set())),
                    _descriptors(state, stored) if stored.schema_type == "PROTOBUF" else (),
                )
    subject = subject or f"{topic}-value"
    live = state.versions(subject)
    return SchemaSet(by_id, live[-1].id if live else None, subject, settled)


_DESCRIPTORS: dict[tuple[int, str], tuple[bytes, ...]] = {}  # a registered schema never changes: parsed once


def _descriptors(state: RegistryState, stored: Any) -> tuple[bytes, ...]:
    """The serialized descriptors of a Protobuf schema, its imports first (none: it does not parse,
    and its records go to the dead-letter table with that reason). Parsed once per schema: this
    runs on the event loop every translation round."""
    from strom.schemas.protobuf import InvalidSchemaError, parse

    key = (stored.id, stored.schema)
    found = _DESCRIPTORS.get(key)
    if found is None:
        try:
            parsed, _ = parse(stored.schema, _referenced(state, stored.references, set()))
            found = tuple(f.SerializeToString() for f in (*parsed.dependencies.values(), parsed.file))
        except InvalidSchemaError:
            found = ()
        _DESCRIPTORS[key] = found
    return found


def _referenced(state: RegistryState, references: list, seen: set[tuple[str, int]]) -> list[tuple[str, str]]:
    """(import name, text) of the schemas ``references`` name, each one's own references before it."""
    out: list[tuple[str, str]] = []
    for reference in references:
        key = (str(reference.get("subject")), int(reference.get("version", 0)))
        found = state.subjects.get(key[0], {}).get(key[1])
        if found is None or key in seen:
            continue
        seen.add(key)
        out += _referenced(state, found.references, seen)
        out.append((str(reference.get("name")), found.schema))
    return out
