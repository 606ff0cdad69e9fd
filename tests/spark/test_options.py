"""Option parsing and offset arithmetic of the Spark source (pure Python, no Spark)."""

from __future__ import annotations

import pytest

from strom.spark.options import (
    DEFAULT_MARKER_TOPIC,
    OffsetRange,
    SinkDelivery,
    SourceOptions,
    StromOptionError,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)

BASE = {"kafka.bootstrap.servers": "h:1"}


def test_parse_like_sparks_kafka_source():
    opts = SourceOptions.parse(
        {
            **BASE,
            "subscribe": "a, b",
            "startingOffsets": '{"a":{"0":23,"1":-2}}',
            "maxOffsetsPerTrigger": "100",
            "kafka.fetch.wait.max.ms": "50",
            "failOnDataLoss": "false",
        },
        streaming=True,
    )
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting == {("a", 0): 23, ("a", 1): -2} and opts.ending == "latest"
    assert opts.max_offsets_per_trigger == 100 and not opts.fail_on_data_loss
    assert opts.client_config == {"bootstrap.servers": "h:1", "fetch.wait.max.ms": "50"}
    assert SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=False).starting == "earliest"
    pattern = SourceOptions.parse({**BASE, "subscribePattern": "logs-.*"}, streaming=True).subscription
    assert pattern.select({"logs-1": 2, "other": 1, "__consumer_offsets": 50}) == [("logs-1", 0), ("logs-1", 1)]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({**BASE}, "exactly one"),
        ({**BASE, "subscribe": "a", "subscribePattern": "b"}, "exactly one"),
        ({**BASE, "subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({**BASE, "subscribe": "a", "kafka.key.deserializer": "x"}, "key.deserializer"),
        ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, "batch queries only"),
    ],
)
def test_bad_options_name_the_option(options, message):
    with pytest.raises(StromOptionError, match=message):
        SourceOptions.parse(options, streaming=True)


def test_offsets_json_round_trip_has_string_partition_keys():
    offsets = {("t", 1): 5, ("t", 0): 7, ("u", 0): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"t": {"0": 7, "1": 5}, "u": {"0": 0}}
    assert offsets_from_json(as_json) == offsets


def test_rate_limit_never_exceeds_the_limit_and_always_progresses():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0, ("t", 3): 0}
    latest = {("t", 0): 1000, ("t", 1): 1, ("t", 2): 1, ("t", 3): 1}
    end = rate_limit(start, latest, 10)
    assert sum(end[tp] - start[tp] for tp in start) == 10
    assert end[("t", 0)] >= 9
    assert rate_limit(start, {tp: 3 for tp in start}, 1) != start
    assert rate_limit(start, {tp: 3 for tp in start}, 100) == {tp: 3 for tp in start}


def test_split_ranges_for_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 10, 20), OffsetRange("t", 2, 5, 5)]
    parts = split_ranges(ranges, 8, None)
    assert len(parts) >= 8
    assert sum(p.size for p in parts) == 1010
    for partition in (0, 1):
        mine = sorted((p.start, p.end) for p in parts if p.partition == partition)
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))  # contiguous, no overlap
    assert [p.size for p in split_ranges(ranges, None, 300) if p.partition == 0] == [250, 250, 250, 250]


def test_sink_delivery_options():
    assert SinkDelivery.parse(BASE) == SinkDelivery()  # at-least-once by default, as Spark's sink
    eos = SinkDelivery.parse({**BASE, "deliveryGuarantee": "Exactly_Once", "writeId": "stats"})
    assert eos.exactly_once and eos.write_id == "stats" and eos.marker_topic == DEFAULT_MARKER_TOPIC
    assert eos.transactional_id("q-1", 3) == "strom-sink-q-1-3"
    custom = SinkDelivery.parse(
        {
            **BASE,
            "deliveryGuarantee": "exactly-once",
            "transactionalIdPrefix": "etl",
            "markerTopic": "etl-markers",
            "kafka.acks": "-1",
        }
    )
    assert custom.transactional_id("q", 0) == "etl-q-0" and custom.marker_topic == "etl-markers"
    for bad, match in [
        ({"deliveryGuarantee": "twice"}, "deliveryGuarantee"),
        ({"writeId": "x"}, "needs deliveryGuarantee"),
        ({"deliveryGuarantee": "exactly-once", "kafka.transactional.id": "t"}, "derived"),
        ({"deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"}, "idempotent"),
        ({"deliveryGuarantee": "exactly-once", "kafka.acks": "1"}, "acks=all"),
        ({"deliveryGuarantee": "exactly-once", "writeId": "a b"}, "letters"),
    ]:
        with pytest.raises(StromOptionError, match=match):
            SinkDelivery.parse({**BASE, **bad})


def test_isolation_level_is_checked():
    ok = SourceOptions.parse({**BASE, "subscribe": "a", "kafka.isolation.level": "read_committed"}, streaming=False)
    assert ok.client_config["isolation.level"] == "read_committed"
    with pytest.raises(StromOptionError, match="isolation.level"):
        SourceOptions.parse({**BASE, "subscribe": "a", "kafka.isolation.level": "committed"}, streaming=False)
