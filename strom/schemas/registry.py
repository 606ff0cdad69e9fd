"""The Schema Registry service: the view of ``_schemas`` on this broker, and its one writer.

Every broker that serves the registry keeps a ``RegistryState`` built by reading its own replica
of ``_schemas`` partition 0 up to the high watermark (a follower's replica is filled by the
ordinary replica fetchers), woken by the partition's purgatory key instead of polling. Writes
are made only by the leader of that partition, one at a time (a lock), with acks=all: it first
waits until its high watermark reaches its log end and has read everything (a new leader may
hold records its predecessor wrote but did not see committed), assigns ids above every id any
record ever named, appends and waits for the high watermark, then reads its own write back.
A broker that is not the leader raises ``NotHere(leader)``: the HTTP front end forwards the
request there, as Confluent's followers forward to their leader.

Errors are ``RegistryError`` with Confluent's HTTP status and error code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.clock import wall_ms
from strom.protocol.errors import KafkaError, NotEnoughReplicasError, NotLeaderError, RequestTimedOutError
from strom.protocol.records import NewRecord, build_batch, decode_batch_records, iter_batch_headers
from strom.schemas import formats
from strom.schemas import records as rec
from strom.schemas.compatibility import LEVELS
from strom.schemas.parser_thread import STOP_WAIT_S, ParserThread, ParsingStopped
from strom.schemas.state import RegistryState, StoredSchema, references_of

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition
    from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.schemas")

TOPIC = rec.SCHEMAS_TOPIC
KEY = (TOPIC, 0)
SCHEMA_TYPES = formats.SCHEMA_TYPES
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
READ_ONLY = ("READONLY", "READONLY_OVERRIDE")
READ_CHUNK = 1024 * 1024
PARSED_CACHE = 1024  # parsed schemas kept (a registration checks every live version of its subject)
LARGE_SCHEMA = 100_000  # characters: a schema whose parse is logged (seconds of CPU for a .proto this size)


class RegistryError(Exception):
    """A request the registry refuses: ``status`` is the HTTP status, ``code`` Confluent's error code."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class NotHere(Exception):
    """This broker cannot answer: the leader of ``_schemas`` (-1: none known) must."""

    def __init__(self, leader: int):
        super().__init__(f"the registry's writer is broker {leader}")
        self.leader = leader


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


@dataclass
class Registered:
    schema_id: int
    version: int
    offset: int  # the view includes everything below it once the write is read back


class SchemaRegistry:
    """Built with the broker id, this broker's replicas (``replicas``: its ``_schemas`` replica, the
    append and acks=all wait), the metadata (who leads ``_schemas``), ``ensure_topic`` (creates the
    topic on the first write) and the write timeout."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        ensure_topic: Callable[[], None],
        write_timeout_s: float,
    ):
        self.broker_id = broker_id
        self._replicas = replicas
        self._metadata = metadata
        self._ensure_topic = ensure_topic
        self.write_timeout_s = write_timeout_s
        self.state = RegistryState()
        self.next_offset = 0  # the next offset of _schemas the view reads
        self._partition: Partition | None = None
        self._write_lock = asyncio.Lock()
        self._parsed: dict[tuple, formats.Parsed | str] = {}  # (type, text, references) -> parsed or why not
        self._parser = ParserThread()  # its thread starts with the first parse; close() stops it

    # -- reading ------------------------------------------------------------------------------------
    def catch_up(self) -> int:
        """Apply what the local replica has committed since the last call; returns the next offset."""
        partition = self._replicas.partitions.get(KEY)
        if partition is None:
            if self._partition is not None and TOPIC not in self._metadata.topics:  # topic deleted
                self._reset(None)
            return self.next_offset
        log_ = partition.log
        if partition is not self._partition or log_.log_end_offset < self.next_offset:
            self._reset(partition)  # a new replica, or a follower truncated below what was read
        upper = log_.high_watermark
        offset = max(self.next_offset, log_.log_start_offset)
        while offset < upper:
            data = log_.read(offset, READ_CHUNK, upper)
            if not data.slices:
                break
            chunk = b"".join(s.read() for s in data.slices)
            last = offset - 1
            for header in iter_batch_headers(chunk):
                if header.last_offset < offset or header.is_control:
                    last = max(last, header.last_offset)
                    continue
                for record in decode_batch_records(chunk, header):
                    if record.offset >= offset and record.key is not None:
                        self._apply(record.key, record.value, record.offset)
                last = header.last_offset
            if last < offset:
                break
            offset = last + 1
        self.next_offset = max(self.next_offset, min(offset, upper))
        return self.next_offset

    def _reset(self, partition: Partition | None) -> None:
        self.state = RegistryState()
        self.next_offset = 0
        self._partition = partition

    def _apply(self, key: bytes, value: bytes | None, offset: int) -> None:
        try:
            self.state.apply(rec.decode_key(key), value)
        except rec.RecordFormatError as exc:  # as Confluent's reader: skip it and go on
            log.warning("skipping record %d of %s: %s", offset, TOPIC, exc)

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the view current: woken by every append and high-watermark move of the replica."""
        purgatory = self._replicas.purgatory
        while not stop.is_set():
            try:
                self.catch_up()
            except Exception:  # a damaged replica must not end the reader
                log.exception("reading %s failed", TOPIC)
            await purgatory.wait([KEY], 1.0)

    def readable(self) -> None:
        """Raises NotHere when this broker holds no replica of an existing ``_schemas``."""
        if TOPIC in self._metadata.topics and KEY not in self._replicas.partitions:
            raise NotHere(self._metadata.leader_of(TOPIC, 0))
        self.catch_up()

    # -- produce-side validation (strom.schemas.validation) ---------------------------------------------
    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None:
        """The live subjects of an id, from this broker's view: a lookup; on a miss the view first
        reads what its replica committed since (a schema registered a moment ago)."""
        found = self.state.subjects_of_id(schema_id)
        if found is None:
            self.catch_up()
            found = self.state.subjects_of_id(schema_id)
            if found is None and self.reading_behind():
                # An in-sync replica holds a registration the writer has committed (and answered)
                # before it learns the new high watermark: a producer may already use the id, so
                # the batch is refused retriably rather than as invalid.
                raise NotEnoughReplicasError(
                    f"schema id {schema_id} is not in this broker's view of {TOPIC} yet, which is "
                    "still reading committed registrations; retry"
                )
        return found

    def reading_behind(self) -> bool:
        """Whether this broker's replica of ``_schemas`` holds records its view has not read: an
        in-sync replica gets a registration before it learns that the writer committed it (and
        answered the client), so a subject just added to a known id may not be in the view yet."""
        self.catch_up()
        partition = self._replicas.partitions.get(KEY)
        return partition is not None and partition.log.log_end_offset > self.next_offset

    def record_name_of_id(self, schema_id: int) -> str | None:
        return self.state.record_name_of_id(schema_id)

    def is_protobuf_id(self, schema_id: int) -> bool:
        if self.state.schema_by_id(schema_id) is None:
            self.catch_up()  # registered a moment ago, as subjects_of_id
        return self.state.is_protobuf_id(schema_id)

    def message_name_of_id(self, schema_id: int, indexes: tuple[int, ...]) -> str | None:
        return self.state.message_name_of_id(schema_id, indexes)

    async def caught_up_to(self, offset: int, timeout_s: float) -> bool:
        """Wait (bounded) until the view has read everything below ``offset``; at once without a
        replica (such a broker forwards its reads too)."""
        if KEY not in self._replicas.partitions:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.catch_up() < offset:
            left = deadline - loop.time()
            if left <= 0:
                return False
            await self._replicas.purgatory.wait([KEY], min(left, 0.1))
        return True

    # -- writing ------------------------------------------------------------------------------------
    async def _leader_partition(self) -> Partition:
        """This broker's leading replica of ``_schemas``, with the view read to its log end."""
        if TOPIC not in self._metadata.topics:
            try:
                self._ensure_topic()
            except KafkaError as exc:
                raise RegistryError(500, 50001, f"Error while creating {TOPIC}: {exc}") from exc
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.write_timeout_s
        while True:  # a topic made a moment ago: its leader is elected and known within moments
            partition = self._replicas.partitions.get(KEY)
            if partition is not None and partition.is_leader and not self._replicas.fenced:
                break
            leader = self._metadata.leader_of(TOPIC, 0)
            if leader >= 0 and leader != self.broker_id:
                raise NotHere(leader)
            if loop.time() >= deadline:
                raise RegistryError(500, 50004, f"No leader for {TOPIC}")
            await self._replicas.purgatory.wait([KEY], 0.05)
        log_ = partition.log
        try:
            if log_.high_watermark < log_.log_end_offset:  # a new leader: its predecessor's last writes
                await self._replicas.wait_committed(TOPIC, 0, log_.log_end_offset - 1, self.write_timeout_s)
        except NotLeaderError:
            raise NotHere(self._metadata.leader_of(TOPIC, 0)) from None
        except RequestTimedOutError as exc:
            raise RegistryError(500, 50002, f"Timed out reading {TOPIC}: {exc}") from exc
        self.catch_up()
        return partition

    async def _write(self, entries: list[tuple[bytes, bytes | None]]) -> int:
        """Append the records with acks=all and read them back; returns the offset after them."""
        now = wall_ms()
        batch = build_batch([NewRecord(value, key=key, timestamp=now) for key, value in entries])
        replicas = self._replicas
        try:
            if replicas.epochs_pending:
                await replicas.until_epochs_durable([KEY], self.write_timeout_s)
            info = replicas.append(TOPIC, 0, batch, -1)
            await replicas.wait_committed(TOPIC, 0, info.last_offset, self.write_timeout_s)
        except NotLeaderError:
            raise NotHere(self._metadata.leader_of(TOPIC, 0)) from None
        except RequestTimedOutError as exc:
            raise RegistryError(500, 50002, f"Timed out writing to {TOPIC}: {exc}") from exc
        except KafkaError as exc:
            raise RegistryError(500, 50001, f"Error while writing to {TOPIC}: {exc}") from exc
        self.catch_up()
        return info.last_offset + 1

    def _writable(self, subject: str | None) -> None:
        """Deletes and config changes are refused only in a read-only mode (IMPORT allows them, as in
        Confluent's registry, so that a failed import can be cleaned up)."""
        mode = self.state.mode(subject)
        if mode in READ_ONLY:
            where = f"Subject {subject}" if subject is not None else "The registry"
            raise RegistryError(422, 42205, f"{where} is in {mode} mode")

    def _may_register(self, subject: str, schema_id: int | None) -> str:
        """Confluent's rules: a given id needs IMPORT mode, no id needs READWRITE; returns the mode."""
        mode = self.state.mode(subject)
        if mode in READ_ONLY:
            raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode")
        if schema_id is not None and mode != "IMPORT":
            raise RegistryError(422, 42205, f"Subject {subject} is not in import mode")
        if schema_id is None and mode != "READWRITE":
            raise RegistryError(422, 42205, f"Subject {subject} is not in read-write mode")
        return mode

    # -- schemas ------------------------------------------------------------------------------------
    def _resolve(self, schema: str, schema_type: str, references: list) -> tuple[tuple, tuple]:
        """(the parse cache's key, the references) of a schema: its references' texts looked up."""
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError(
                422, 42201, f"Invalid schema: schemaType {schema_type} is not one of {list(SCHEMA_TYPES)}"
            )
        try:
            refs = references_of(references) if references else ()
        except (AttributeError, TypeError, ValueError):
            raise RegistryError(422, 42201, "Invalid schema: references are {name, subject, version} objects") from None
        texts: dict[str, str] = {}

        def collect(listed: tuple[tuple[str, str, int], ...]) -> None:
            """The referenced texts and theirs, in turn, dependencies first (as Confluent's registry
            resolves references: a referenced Avro type may use one that another subject defines)."""
            for name, ref_subject, ref_version in listed:
                if name in texts:
                    continue
                found = self.state.subjects.get(ref_subject, {}).get(ref_version)
                if found is None:
                    raise RegistryError(
                        422, 42201, f"Invalid schema: reference {name} ({ref_subject} v{ref_version}) not found"
                    )
                texts[name] = ""  # taken, so that a cycle of references ends here
                collect(references_of(found.references) if found.references else ())
                del texts[name]
                texts[name] = found.schema

        collect(refs)
        return (schema_type, schema, tuple(texts.items())), refs

    def _parse_now(self, key: tuple) -> formats.Parsed | str:
        """Parse and remember (a schema, or why it does not parse); pure, so it may run in the
        parsing thread."""
        schema_type, schema, texts = key
        try:
            result: formats.Parsed | str = formats.parse(schema_type, schema, list(texts))[0]
        except formats.InvalidSchemaError as exc:
            result = str(exc)
        if len(self._parsed) >= PARSED_CACHE:
            self._parsed.clear()
        self._parsed[key] = result
        return result

    def _parse(self, schema: str, schema_type: str, references: list) -> tuple[formats.Parsed, StoredSchema]:
        key, refs = self._resolve(schema, schema_type, references)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = self._parse_now(key)
        if isinstance(parsed, str):
            raise RegistryError(422, 42201, parsed)
        return parsed, StoredSchema(parsed.canonical, schema_type, refs)

    async def parse_ahead(self, schemas: list[tuple[str, str, list]], subject: str | None = None) -> None:
        """Parse ``schemas`` ((text, type, references)) and the live versions of ``subject`` in the
        registry's parsing thread (strom.schemas.parser_thread), so that the call that follows
        finds them cached: parsing is pure Python (a 1 MB .proto takes seconds) and must not stall
        the loop that serves produce and fetch. A parse the broker's shutdown stops is a 500."""
        if subject is not None:
            schemas = schemas + [(v.schema, v.schema_type, v.references) for v in self.state.versions(subject)]
        for schema, schema_type, references in schemas:
            try:
                key, _ = self._resolve(schema, schema_type, references)
            except RegistryError:
                continue  # the call that follows says why
            if key not in self._parsed:
                if len(schema) >= LARGE_SCHEMA:
                    log.info("parsing a %s schema of %d characters in the parsing thread", schema_type, len(schema))
                try:
                    await asyncio.wrap_future(self._parser.submit(self._parse_now, key))
                except ParsingStopped:
                    raise RegistryError(500, 50001, "The Schema Registry is shutting down") from None

    def close(self) -> None:
        """Stop the parsing thread (the broker shuts down): a parse under way is interrupted, and
        the wait for it is bounded."""
        if not self._parser.stop():
            log.warning("the Schema Registry's parsing thread did not end within %.0fs", STOP_WAIT_S)

    def serialized(self, stored: StoredSchema) -> str:
        """``format=serialized``: a Protobuf schema as base64 of its FileDescriptorProto (what
        confluent-kafka's Protobuf deserializers ask for); other types as they are."""
        if stored.schema_type != "PROTOBUF":
            return stored.schema
        parsed, _ = self._parse(stored.schema, stored.schema_type, stored.references_json())
        return str(parsed.value.serialized())

    def without_extensions(self, stored: StoredSchema) -> str:
        """``format=ignore_extensions``: a Protobuf schema without its custom options and
        extensions, as Confluent's registry answers it; other types as they are."""
        if stored.schema_type != "PROTOBUF":
            return stored.schema
        parsed, _ = self._parse(stored.schema, stored.schema_type, stored.references_json())
        return str(parsed.value.without_extensions())

    def _live_parsed(self, subject: str) -> list[tuple[int, formats.Parsed]]:
        out = []
        for stored in self.state.versions(subject):
            try:
                out.append((stored.version, self._parse(stored.schema, stored.schema_type, stored.references)[0]))
            except RegistryError as exc:  # not ours to refuse now: say so and leave it out of the check
                log.warning("version %d of %s does not parse: %s", stored.version, subject, exc.message)
        return out

    def _problems(self, subject: str, parsed: formats.Parsed, level: str | None = None) -> list[str]:
        previous = [p for _, p in self._live_parsed(subject)]
        return formats.compatibility_problems(level or self.state.compatibility(subject), parsed, previous)

    def _prepare(self, schema: str, schema_type: str, references: list, normalize: bool):
        parsed, stored = self._parse(schema, schema_type, references)
        if normalize:
            try:
                text = formats.normalized(schema_type, stored.schema, parsed.value)
            except formats.InvalidSchemaError as exc:
                raise RegistryError(422, 42201, str(exc)) from None
            refs = stored.references
            if schema_type == "PROTOBUF":  # Confluent's ProtobufSchema.normalize sorts them too
                refs = tuple(dict.fromkeys(sorted(refs, key=lambda r: (r[1], r[2]))))
            stored = StoredSchema(text, stored.schema_type, refs)
        return parsed, stored

    def _existing(
        self, subject: str, stored: StoredSchema, parsed: formats.Parsed, deleted: bool = False
    ) -> rec.SchemaValue | None:
        for value in reversed(self.state.versions(subject, deleted)):
            if self.state.stored(value) == stored or self._same_protobuf(value, stored, parsed):
                return value
        return None

    def _same_protobuf(self, value: rec.SchemaValue, stored: StoredSchema, parsed: formats.Parsed) -> bool:
        """A Protobuf version whose text differs is the same schema when both spell one schema
        (strom.schemas.protobuf.ParsedProto.same): the same .proto sent as text and as a descriptor
        (confluent-kafka's serializers look a registered text up with its descriptor), type names
        written otherwise, or a ``_schemas`` topic copied from Confluent's registry, whose printer
        lays text out otherwise."""
        if value.schema_type != "PROTOBUF" or stored.schema_type != "PROTOBUF" or value.schema == stored.schema:
            return False
        if references_of(value.references) != stored.references:
            return False
        try:
            old, _ = self._parse(value.schema, value.schema_type, value.references)
        except RegistryError:
            return False
        return bool(old.value.same(parsed.value))

    async def register(
        self,
        subject: str,
        schema: str,
        schema_type: str,
        references: list,
        normalize: bool,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> Registered:
        """Register ``schema`` under ``subject``. With ``schema_id`` (IMPORT mode only, as Confluent's
        registry) the schema takes that id, and ``version`` that version: how a registry is migrated
        with its ids, so that records already written still name the right schema. An imported id
        raises ``max_id`` like any other, so the ids handed out later are above it."""
        self.readable()
        await self.parse_ahead([(schema, schema_type, references)], subject)
        parsed, stored = self._prepare(schema, schema_type, references, normalize)
        found = self._existing(subject, stored, parsed)
        if found is not None and version is None and schema_id in (None, found.id):
            return Registered(found.id, found.version, self.next_offset)  # any broker answers from its view
        async with self._write_lock:
            await self._leader_partition()
            found = self._existing(subject, stored, parsed)
            if found is not None and version in (None, found.version) and schema_id in (None, found.id):
                return Registered(found.id, found.version, self.next_offset)
            mode = self._may_register(subject, schema_id)
            next_version = max(self.state.subjects.get(subject, {0: None}), default=0) + 1
            if mode != "IMPORT":
                problems = self._problems(subject, parsed)
                if problems:
                    raise RegistryError(
                        409,
                        409,
                        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                        f"details: {problems}",
                    )
                if version is not None and version != next_version:
                    raise RegistryError(422, 42201, "Invalid schema: version is not one more than previous version")
            if schema_id is not None:
                taken = self.state.schema_by_id(schema_id)
                if taken is not None and taken != stored:
                    raise RegistryError(422, 42205, f"Overwrite new schema with id {schema_id} is not permitted.")
            else:
                known = self.state.id_of(stored)
                schema_id = known if known is not None else self.state.max_id + 1
            version = version or next_version
            value = rec.SchemaValue(
                subject, version, schema_id, stored.schema, schema_type, stored.references_json(), False
            )
            entries = self._superseded(subject, schema_id, version)
            entries.append((rec.encode_key(rec.SchemaKey(subject, version)), rec.encode_schema_value(value)))
            offset = await self._write(entries)
            log.info("registered schema %d as version %d of %s (%s)", schema_id, version, subject, mode)
            return Registered(schema_id, version, offset)

    def _superseded(self, subject: str, schema_id: int, version: int) -> list[tuple[bytes, bytes | None]]:
        """Tombstones of the subject's soft-deleted versions below ``version`` that hold the id being
        registered, as Confluent's ``KafkaSchemaRegistry.register`` writes them (in any mode: the
        schema comes back under its old id as a new version, and the soft-deleted one goes for good),
        except a version some schema, soft-deleted or not, still names as a reference (references
        resolve by subject and version, and the referrer may be restored)."""
        going = [
            v
            for v in self.state.versions(subject, True)
            if v.deleted and v.id == schema_id and v.version < version and not self._referenced(subject, v.version)
        ]
        return [(rec.encode_key(rec.SchemaKey(subject, v.version)), None) for v in going]

    def _refuse_if_referenced(self, subject: str, versions: list[int]) -> None:
        """Confluent refuses to delete, softly or for good, a version another schema names as a
        reference (42206), until that schema is deleted for good: a soft-deleted referrer can be
        restored, and its reference must still resolve then."""
        for version in versions:
            if self._referenced(subject, version):
                raise RegistryError(
                    422,
                    42206,
                    "One or more references exist to the schema "
                    f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}",
                )

    def _referenced(self, subject: str, version: int) -> bool:
        return any(
            (str(r.get("subject")), r.get("version")) == (subject, version)
            for versions in self.state.subjects.values()
            for value in versions.values()
            for r in value.references
            if isinstance(r, dict)
        )

    def lookup(
        self, subject: str, schema: str, schema_type: str, references: list, normalize: bool, deleted: bool
    ) -> rec.SchemaValue:
        self.readable()
        if not self.state.versions(subject, deleted):
            raise subject_not_found(subject)
        parsed, stored = self._prepare(schema, schema_type, references, normalize)
        found = self._existing(subject, stored, parsed, deleted)
        if found is None:
            raise schema_not_found()
        return found

    def schema_by_id(self, schema_id: int) -> StoredSchema:
        self.readable()
        found = self.state.schema_by_id(schema_id)
        if found is None:
            raise schema_not_found(f"Schema {schema_id} not found")
        return found

    def usages(self, schema_id: int, deleted: bool) -> list[rec.SchemaValue]:
        self.schema_by_id(schema_id)
        return self.state.usages(schema_id, deleted)

    def subjects(self, deleted: bool, prefix: str) -> list[str]:
        self.readable()
        return [s for s in self.state.subject_names(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool) -> list[int]:
        self.readable()
        found = self.state.versions(subject, deleted)
        if not found:
            raise subject_not_found(subject)
        return [v.version for v in found]

    def version(self, subject: str, version: str, deleted: bool = False) -> rec.SchemaValue:
        self.readable()
        number = parse_version(version)
        live = self.state.versions(subject, deleted)
        if number == -1:
            if not live:
                raise subject_not_found(subject)
            return live[-1]
        found = self.state.subjects.get(subject, {}).get(number)
        if found is None or (found.deleted and not deleted):
            if not self.state.versions(subject, True):
                raise subject_not_found(subject)
            raise version_not_found(subject, number)
        return found

    async def delete_version(self, subject: str, version: str, permanent: bool) -> Registered:
        self.readable()
        number = parse_version(version)
        async with self._write_lock:
            await self._leader_partition()
            self._writable(subject)
            every = self.state.versions(subject, True)
            if not every:
                raise subject_not_found(subject)
            if number == -1:
                live = self.state.versions(subject)
                if not live:
                    raise version_not_found(subject, version)
                number = live[-1].version
            found = self.state.subjects[subject].get(number)
            if found is None:
                raise version_not_found(subject, number)
            key = rec.encode_key(rec.SchemaKey(subject, number))
            self._refuse_if_referenced(subject, [number])
            if not permanent:
                if found.deleted:
                    raise RegistryError(
                        404,
                        40406,
                        f"Subject '{subject}' Version {number} was soft deleted. "
                        "Set permanent=true to delete permanently",
                    )
                deleted = rec.SchemaValue(**{**found.__dict__, "deleted": True})
                offset = await self._write([(key, rec.encode_schema_value(deleted))])
            else:
                if not found.deleted:
                    raise RegistryError(
                        404,
                        40407,
                        f"Subject '{subject}' Version {number} was not deleted first before being permanently deleted",
                    )
                offset = await self._write([(key, None), *self._keep_max_id([found])])
            return Registered(found.id, number, offset)

    def _keep_max_id(self, going: list[rec.SchemaValue]) -> list[tuple[bytes, bytes | None]]:
        """A NOOP record holding the highest id, when a permanent delete removes a record naming it."""
        if any(v.id >= self.state.max_id for v in going):
            return [(rec.encode_key(rec.NoopKey()), rec.encode_noop_value(self.state.max_id))]
        return []

    async def delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], int]:
        self.readable()
        async with self._write_lock:
            await self._leader_partition()
            self._writable(subject)
            every = self.state.versions(subject, True)
            live = self.state.versions(subject)
            if not every:
                raise subject_not_found(subject)
            if not permanent:
                if not live:
                    raise RegistryError(
                        404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
                    )
                self._refuse_if_referenced(subject, [v.version for v in live])
                key = rec.encode_key(rec.DeleteSubjectKey(subject))
                offset = await self._write([(key, rec.encode_delete_subject_value(subject, every[-1].version))])
                return [v.version for v in live], offset
            if live:
                raise RegistryError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            self._refuse_if_referenced(subject, [v.version for v in every])
            entries: list[tuple[bytes, bytes | None]] = [
                (rec.encode_key(rec.SchemaKey(subject, v.version)), None) for v in every
            ]
            entries.append((rec.encode_key(rec.DeleteSubjectKey(subject)), None))
            offset = await self._write(entries + self._keep_max_id(every))
            return [v.version for v in every], offset

    # -- compatibility, config, mode ----------------------------------------------------------------
    def check(
        self, subject: str, version: str | None, schema: str, schema_type: str, references: list, normalize: bool
    ) -> list[str]:
        """The problems of ``schema`` against one version (or, with None, the versions the subject's
        level names); empty when compatible."""
        self.readable()
        parsed, _ = self._prepare(schema, schema_type, references, normalize)
        level = self.state.compatibility(subject)
        if version is None:
            return self._problems(subject, parsed)
        old = self.version(subject, version)
        old_parsed, _ = self._parse(old.schema, old.schema_type, old.references)
        return formats.compatibility_problems(level.removesuffix("_TRANSITIVE"), parsed, [old_parsed])

    def compatibility(self, subject: str | None, default_to_global: bool) -> str:
        self.readable()
        if subject is not None and subject not in self.state.configs and not default_to_global:
            raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
        return self.state.compatibility(subject)

    async def set_compatibility(self, subject: str | None, level: str) -> int:
        if level not in LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level. Valid values are {list(LEVELS)}")
        self.readable()
        async with self._write_lock:
            await self._leader_partition()
            key = rec.encode_key(rec.ConfigKey(subject))
            return await self._write([(key, rec.encode_config_value(level))])

    async def delete_compatibility(self, subject: str | None) -> tuple[str, int]:
        self.readable()
        async with self._write_lock:
            await self._leader_partition()
            if subject is not None and subject not in self.state.configs:
                raise RegistryError(
                    404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            old = self.state.compatibility(subject)
            offset = await self._write([(rec.encode_key(rec.ConfigKey(subject)), None)])
            return old, offset

    def mode(self, subject: str | None, default_to_global: bool) -> str:
        self.readable()
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
        return self.state.mode(subject)

    async def set_mode(self, subject: str | None, mode: str, force: bool = False) -> int:
        """Entering IMPORT mode needs an empty scope (no live version in the subject, or in the
        registry for the global mode) unless ``force``; what is left soft-deleted there is then
        deleted for good, as Confluent's registry does, so that imported versions do not meet it."""
        if mode not in MODES:
            raise RegistryError(422, 42204, f"Invalid mode. Valid values are {list(MODES)}")
        self.readable()
        async with self._write_lock:
            await self._leader_partition()
            entries: list[tuple[bytes, bytes | None]] = []
            if mode == "IMPORT" and self.state.mode(subject) != "IMPORT" and not force:
                scope = [subject] if subject is not None else list(self.state.subjects)
                if any(self.state.versions(s) for s in scope):
                    raise RegistryError(422, 42205, "Cannot import since found existing subjects")
                going = [v for s in scope for v in self.state.versions(s, True)]
                entries = [(rec.encode_key(rec.SchemaKey(v.subject, v.version)), None) for v in going]
                entries += [(rec.encode_key(rec.DeleteSubjectKey(s)), None) for s in sorted({v.subject for v in going})]
                entries += self._keep_max_id(going)
            entries.append((rec.encode_key(rec.ModeKey(subject)), rec.encode_mode_value(mode)))
            return await self._write(entries)

    async def delete_mode(self, subject: str) -> tuple[str, int]:
        self.readable()
        async with self._write_lock:
            await self._leader_partition()
            if subject not in self.state.modes:
                raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
            old = self.state.mode(subject)
            return old, await self._write([(rec.encode_key(rec.ModeKey(subject)), None)])


def parse_version(text: str) -> int:
    """A version path segment: ``latest`` or -1 (-1), or 1 .. 2^31-1; else 42202."""
    if text == "latest":
        return -1
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number == -1 or 1 <= number <= 2**31 - 1:
        return number
    raise RegistryError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )
