"""Running out of file descriptors: a clear error that names the limit, no half-made topic, no
log dir taken offline, and the broker keeps serving.

Each partition replica holds a descriptor per segment (its .log; the indexes are mapped without
one), so a broker whose ``ulimit -n`` is low reaches it at a few hundred partitions.
"""

from __future__ import annotations

import resource
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.errors import ResourceExhaustedError
from strom.resources import open_descriptors
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager
from tests.broker_process import BrokerProcess

WAIT_S = 30
LIMIT = 700


class LimitedBroker(BrokerProcess):
    """A broker started under `prlimit --nofile=SOFT:HARD`, as a shell with a low ulimit would."""

    def __init__(self, *args, soft: int, hard: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.soft, self.hard = soft, hard

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.soft}:{self.hard}", "--", *super().command()]


def test_soft_limit_is_raised_to_the_hard_limit_and_both_are_logged(tmp_path):
    with LimitedBroker(tmp_path / "data", soft=512, hard=4096) as broker:
        assert "open files limit: soft 512 raised to 4096 (hard limit 4096)" in broker.read_log()


def test_a_topic_beyond_the_descriptor_limit_is_refused_whole_with_an_error_naming_it(tmp_path):
    with LimitedBroker(tmp_path / "data", soft=LIMIT, hard=LIMIT) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("huge", num_partitions=600, replication_factor=1)])["huge"].result(WAIT_S)
        error = refused.value.args[0]
        assert error.name() == "KAFKA_STORAGE_ERROR"
        assert "file descriptors" in error.str() and f"limit of {LIMIT}" in error.str(), error.str()

        # nothing of it was made: not in the metadata, no partition dir
        assert "huge" not in admin.list_topics(timeout=WAIT_S).topics
        assert not list((tmp_path / "data").glob("huge-*"))

        # the broker still serves: a topic that fits is created and round-trips
        admin.create_topics([NewTopic("fits", num_partitions=4, replication_factor=1)])["fits"].result(WAIT_S)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(20):
            producer.produce("fits", f"v{i}".encode(), partition=i % 4)
        assert producer.flush(WAIT_S) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["fits"])
        got = set()
        deadline = time.monotonic() + WAIT_S
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.add(message.value())
        consumer.close()
        assert got == {f"v{i}".encode() for i in range(20)}


def test_running_out_of_descriptors_while_creating_a_log_does_not_take_the_dir_offline(tmp_path):
    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    created = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 40, hard))
        with pytest.raises(ResourceExhaustedError) as exhausted:
            for index in range(100):
                created.append(manager.get_or_create_log(("t", index)))
        assert "ran out of open files" in str(exhausted.value)
        assert "ulimit -n" in str(exhausted.value)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert manager.offline_dirs == set()
    failed_index = len(created)
    assert not (tmp_path / "logs" / f"t-{failed_index}").exists(), "a half-made partition dir was left behind"
    # with descriptors back, the same log is created and works
    log = manager.get_or_create_log(("t", failed_index))
    assert log.log_end_offset == 0
    manager.shutdown()
