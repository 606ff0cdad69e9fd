"""The schema modes' translation round itself (strom.iceberg.worker.translate_topic, as a broker's
worker process runs it) over a real partition log and a real SQL catalog, given the registry as
plain data: a record whose schema id the broker's view has not read yet waits for a later round
instead of becoming a dead letter, and is translated once the view knows it."""

from __future__ import annotations

import io
import json
import struct
import time

from fastavro import parse_schema, schemaless_writer

from strom.iceberg.schema_modes import RegisteredSchema, SchemaSet
from strom.iceberg.table import CatalogSettings, dlq_identifier, identifier, open_catalog
from strom.iceberg.worker import PartitionJob, TopicJob, translate_topic
from strom.protocol.records import NewRecord, build_batch
from strom.storage.log import Log
from strom.storage.log_config import LogConfig

POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}]}


def framed(schema_id: int, value: dict) -> bytes:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">bI", 0, schema_id))
    schemaless_writer(buffer, parse_schema(POINT), value)
    return buffer.getvalue()


def test_an_id_the_view_has_not_read_waits_and_an_unknown_one_is_a_dead_letter(tmp_path):
    log = Log(str(tmp_path / "points-0"), LogConfig())
    values = [framed(1, {"x": 0, "y": 0}), framed(2, {"x": 1, "y": 1}), framed(3, {"x": 2, "y": 2})]
    log.append_as_leader(build_batch([NewRecord(v, timestamp=int(time.time() * 1000)) for v in values]), 0)
    log.flush()
    log.update_high_watermark(log.log_end_offset)
    catalog = CatalogSettings("sqlite:///" + str(tmp_path / "c.db"), "file://" + str(tmp_path / "w"))
    text = RegisteredSchema("AVRO", json.dumps(POINT))

    def round_(schemas: SchemaSet):
        partition = PartitionJob(0, log.directory, 0, log.last_stable_offset, 0, ())
        return translate_topic(TopicJob("points", catalog, (partition,), "value_schema_id_prefix", schemas))

    # the view knows id 1 only and has not read all its replica holds: offset 1 (id 2) waits
    first = round_(SchemaSet({1: text}, settled=False))
    assert (first.rows, first.dead_letters, first.offsets, first.waiting) == (1, 0, {0: 1}, {0: 1})
    # now it knows id 2 and has read everything: id 3 is unknown for good, a dead letter
    second = round_(SchemaSet({1: text, 2: text}, settled=True))
    assert (second.rows, second.dead_letters, second.offsets, second.waiting) == (1, 1, {0: 3}, {})
    assert round_(SchemaSet({1: text, 2: text}, settled=True)).rows == 0  # nothing twice
    opened = open_catalog(catalog)
    rows = opened.load_table(identifier("points")).scan().to_arrow().to_pylist()
    assert sorted((r["kafka"]["offset"], r["x"], r["y"]) for r in rows) == [(0, 0, 0), (1, 1, 1)]
    dead = opened.load_table(dlq_identifier("points")).scan().to_arrow().to_pylist()
    assert [(d["kafka"]["offset"], d["value"], d["reason"]) for d in dead] == [(2, values[2], "unknown schema id 3")]
    log.close()


def test_a_round_that_dies_between_its_two_commits_leaves_no_dead_letter_twice(tmp_path, monkeypatch):
    """The dead letters are committed first; a round killed before the table's commit (here: the
    process's second append raises, as a kill -9 there would end it) is done again from the
    table's offsets, and the dead-letter table's own offsets keep its rows from coming twice."""
    from pyiceberg.table import Table

    log = Log(str(tmp_path / "mixed-0"), LogConfig())
    values = [framed(1, {"x": i, "y": -i}) if i % 3 else b"no prefix %d" % i for i in range(9)]
    log.append_as_leader(build_batch([NewRecord(v, timestamp=int(time.time() * 1000)) for v in values]), 0)
    log.flush()
    log.update_high_watermark(log.log_end_offset)
    catalog = CatalogSettings("sqlite:///" + str(tmp_path / "c.db"), "file://" + str(tmp_path / "w"))
    job = TopicJob(
        "mixed",
        catalog,
        (PartitionJob(0, log.directory, 0, log.last_stable_offset, 0, ()),),
        "value_schema_id_prefix",
        SchemaSet({1: RegisteredSchema("AVRO", json.dumps(POINT))}),
    )
    real_append = Table.append
    appends = []

    def dies_at_the_second(self, *args, **kwargs):
        appends.append(self.name())
        if len(appends) == 2:
            raise SystemExit("killed between the two commits")
        return real_append(self, *args, **kwargs)

    monkeypatch.setattr(Table, "append", dies_at_the_second)
    try:
        translate_topic(job)
        raise AssertionError("the round was not interrupted")
    except SystemExit:
        pass
    monkeypatch.setattr(Table, "append", real_append)
    assert appends == [("strom", "mixed~dlq"), ("strom", "mixed")]  # the dead letters first
    opened = open_catalog(catalog)
    assert not opened.load_table(identifier("mixed")).scan().to_arrow().num_rows
    result = translate_topic(job)
    assert (result.rows, result.dead_letters) == (6, 0)  # the dead letters were there already
    rows = opened.load_table(identifier("mixed")).scan().to_arrow().to_pylist()
    dead = opened.load_table(dlq_identifier("mixed")).scan().to_arrow().to_pylist()
    assert sorted(r["kafka"]["offset"] for r in rows) == [i for i in range(9) if i % 3]
    assert sorted(d["kafka"]["offset"] for d in dead) == [0, 3, 6]
    log.close()


def test_a_commit_made_while_the_schema_evolves_is_not_overwritten(tmp_path, monkeypatch):
    """Two leaders of two partitions: while one evolves the table's schema, the other commits its
    round. Evolving reloads the table, so the first round must plan again rather than append on
    top of a snapshot it did not read (which would drop the other partition's offsets)."""
    import strom.iceberg.worker as worker
    from strom.iceberg.table import committed_offsets

    catalog = CatalogSettings("sqlite:///" + str(tmp_path / "c.db"), "file://" + str(tmp_path / "w"))
    point3 = {**POINT, "fields": [*POINT["fields"], {"name": "z", "type": ["null", "int"], "default": None}]}
    schemas = SchemaSet(
        {1: RegisteredSchema("AVRO", json.dumps(POINT)), 2: RegisteredSchema("AVRO", json.dumps(point3))}
    )
    logs = []
    for partition, schema_id in ((0, 1), (1, 1)):
        log = Log(str(tmp_path / f"race-{partition}"), LogConfig())
        value = framed(schema_id, {"x": partition, "y": 0})
        log.append_as_leader(build_batch([NewRecord(value, timestamp=int(time.time() * 1000))] * 3), 0)
        log.flush()
        log.update_high_watermark(log.log_end_offset)
        logs.append(log)

    def job(partition: int) -> TopicJob:
        log = logs[partition]
        part = PartitionJob(partition, log.directory, 0, log.last_stable_offset, 0, ())
        return TopicJob("race", catalog, (part,), "value_schema_id_prefix", schemas)

    translate_topic(job(0))  # the table exists with x and y
    # partition 0 gets records of a new version (a column z), partition 1 more of the old one
    body = io.BytesIO()
    body.write(struct.pack(">bI", 0, 2))
    schemaless_writer(body, parse_schema(point3), {"x": 7, "y": 7, "z": 7})
    logs[0].append_as_leader(build_batch([NewRecord(body.getvalue(), timestamp=int(time.time() * 1000))]), 0)
    logs[0].flush()
    logs[0].update_high_watermark(logs[0].log_end_offset)
    real_evolve = worker._evolve
    interleaved = []

    def evolve_while_the_other_commits(table, decoder, ids):
        if not interleaved:
            interleaved.append(None)
            interleaved[0] = translate_topic(job(1))  # the other leader's round lands now
        return real_evolve(table, decoder, ids)

    monkeypatch.setattr(worker, "_evolve", evolve_while_the_other_commits)
    result = translate_topic(job(0))
    assert result.commits_lost == 1 and interleaved[0].rows == 3
    monkeypatch.setattr(worker, "_evolve", real_evolve)
    table = open_catalog(catalog).load_table(identifier("race"))
    assert committed_offsets(table) == {0: 4, 1: 3}
    assert translate_topic(job(1)).rows == 0  # its offsets survived: nothing again
    rows = open_catalog(catalog).load_table(identifier("race")).scan().to_arrow().to_pylist()
    assert sorted((r["kafka"]["partition"], r["kafka"]["offset"], r["z"]) for r in rows) == [
        (0, 0, None),
        (0, 1, None),
        (0, 2, None),
        (0, 3, 7),
        (1, 0, None),
        (1, 1, None),
        (1, 2, None),
    ]
    for log in logs:
        log.close()
