"""What a test does with a broker or a cluster: create topics, produce, consume, find leaders.

Everything goes through confluent-kafka (librdkafka), the client the strom tools use, so a test
sees what an application sees. librdkafka's log goes to the ``strom.testing.librdkafka`` logger
(pytest captures it) instead of stderr: killing a broker on purpose would otherwise fill the
terminal with "Connection refused" lines.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

CLIENT_LOGGER = "strom.testing.librdkafka"
POLL_S = 0.05

# records still reach the root logger's handlers (pytest's capture); none go to stderr by default
logging.getLogger(CLIENT_LOGGER).addHandler(logging.NullHandler())

Value = bytes | str | None
Message = Value | tuple[Value, Value]


@dataclass(frozen=True)
class Record:
    """One message as it is stored: where it landed and its bytes (keys and values are never decoded)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp: int = -1


def _encode(value: Value) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _split(message: Message) -> tuple[bytes | None, bytes | None]:
    if isinstance(message, tuple):
        if len(message) != 2:
            raise ValueError(f"a message is a value or a (key, value) pair, got a tuple of {len(message)}")
        return _encode(message[0]), _encode(message[1])
    if message is not None and not isinstance(message, (bytes, bytearray, str)):
        raise TypeError(f"a message value is bytes, str or None, got {type(message).__name__}")
    return None, _encode(message)


def _record(msg) -> Record:
    return Record(
        msg.topic(),
        msg.partition(),
        msg.offset(),
        msg.key(),
        msg.value(),
        list(msg.headers() or []),
        msg.timestamp()[1],
    )


class KafkaHelpers:
    """Mixed into Broker and Cluster, which provide ``bootstrap_servers``."""

    if TYPE_CHECKING:

        @property
        def bootstrap_servers(self) -> str: ...

    _admin = None
    _producer = None

    def start(self): ...

    def stop(self) -> None: ...

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- clients -------------------------------------------------------------------------------------
    def client_config(self, **extra) -> dict:
        """A confluent-kafka config for this broker or cluster (log routed to Python logging)."""
        return {"bootstrap.servers": self.bootstrap_servers, "logger": logging.getLogger(CLIENT_LOGGER), **extra}

    @property
    def admin(self):
        """A confluent-kafka AdminClient, made once."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.client_config())
        return self._admin

    def _close_clients(self) -> None:
        producer, self._producer, self._admin = self._producer, None, None
        if producer is not None:
            producer.purge()
            producer.flush(0)

    # -- topics --------------------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Create a topic and return its name once every partition has a leader and a full ISR.

        Raises confluent_kafka.KafkaException with the broker's error (TOPIC_ALREADY_EXISTS, ...).
        """
        from confluent_kafka.admin import NewTopic

        futures = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(config or {}))],
            request_timeout=timeout,
            operation_timeout=timeout,
        )
        futures[name].result(timeout)
        self.wait_for_isr(name, timeout, replicas=replication_factor, partitions=partitions)
        return name

    def wait_for_isr(
        self, topic: str, timeout: float = 30.0, *, replicas: int | None = None, partitions: int | None = None
    ) -> None:
        """Wait until every partition of ``topic`` has a leader and all its replicas in sync.

        After ``restart`` the restarted broker rejoins the ISR only once it has caught up; wait for
        that before killing another broker, or the next kill may leave a partition without a leader.
        """
        deadline = time.monotonic() + timeout
        last = "no metadata yet"
        while True:
            try:
                found = self.admin.list_topics(topic=topic, timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                meta = found.topics.get(topic)
                if meta is None or meta.error is not None:
                    last = f"topic error {meta.error if meta else 'missing'}"
                elif partitions is not None and len(meta.partitions) < partitions:
                    last = f"{len(meta.partitions)} of {partitions} partitions"
                else:
                    lagging = [
                        p
                        for p in meta.partitions.values()
                        if p.leader < 0
                        or p.error is not None
                        or len(p.isrs) < (replicas if replicas is not None else len(p.replicas))
                    ]
                    if not lagging:
                        return
                    p = lagging[0]
                    last = f"partition {p.id}: leader {p.leader}, replicas {p.replicas}, isr {p.isrs}"
            except Exception as exc:  # KafkaException while a broker is down: retried until the deadline
                last = str(exc)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic}: partitions not led and in sync within {timeout}s ({last})")
            time.sleep(POLL_S)

    def leader(self, topic: str, partition: int = 0, timeout: float = 10.0) -> int:
        """The broker id leading ``topic``'s ``partition`` (what to kill to test a failover)."""
        meta = self.admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None or partition not in meta.partitions:
            raise ValueError(f"{topic}-{partition} is unknown to the cluster")
        return meta.partitions[partition].leader

    # -- produce -------------------------------------------------------------------------------------
    def produce(
        self,
        topic: str,
        messages: Iterable[Message],
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timeout: float = 30.0,
    ) -> list[Record]:
        """Write values (or (key, value) pairs) with acks=all; returns them as stored, with offsets.

        str is encoded as UTF-8. Raises KafkaException on the first delivery error, TimeoutError
        when the cluster has not acknowledged everything within ``timeout``.
        """
        if isinstance(messages, (str, bytes, bytearray)):
            raise TypeError("produce() takes a list of values or (key, value) pairs, not a single value")
        from confluent_kafka import KafkaException, Producer

        if self._producer is None:
            self._producer = Producer(self.client_config(**{"acks": "all", "enable.idempotence": True, "linger.ms": 1}))
        delivered: list = []
        errors: list = []

        def on_delivery(err, msg):
            (errors if err is not None else delivered).append(err if err is not None else msg)

        partition_arg = -1 if partition is None else partition  # -1: librdkafka's partitioner picks (its default)
        header_list: list[tuple[str, str | bytes | None]] | None = None if headers is None else list(headers)
        count = 0
        for message in messages:
            key, value = _split(message)
            self._producer.produce(topic, value, key, partition_arg, headers=header_list, on_delivery=on_delivery)
            count += 1
            self._producer.poll(0)
        remaining = self._producer.flush(timeout)
        if errors:
            raise KafkaException(errors[0])
        if remaining:
            self._producer.purge()
            self._producer.flush(0)
            raise TimeoutError(f"{remaining} of {count} messages to {topic} not acknowledged within {timeout}s")
        return [_record(msg) for msg in delivered]

    # -- consume -------------------------------------------------------------------------------------
    def consume(
        self, topic: str, n: int, timeout: float = 10.0, *, group_id: str | None = None, config: dict | None = None
    ) -> list[Record]:
        """Read ``n`` messages of ``topic`` from the beginning of its partitions.

        Without ``group_id`` every partition is assigned from offset 0 (no group, no commits);
        with it the consumer joins that group, starts at the committed offsets (earliest when
        none) and commits what it read. Raises TimeoutError naming how many arrived when fewer
        than ``n`` come within ``timeout``.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

        settings = self.client_config(
            **{
                "group.id": group_id or f"strom-testing-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": group_id is not None,
                # a fetch parked in the broker delays its shutdown by this much
                "fetch.wait.max.ms": 100,
            }
        )
        settings.update(config or {})
        consumer = Consumer(settings)
        deadline = time.monotonic() + timeout
        got: list[Record] = []
        try:
            if group_id is None:
                consumer.assign(
                    [TopicPartition(topic, p, OFFSET_BEGINNING) for p in self._partitions(consumer, topic, deadline)]
                )
            else:
                consumer.subscribe([topic])
            while len(got) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"consumed {len(got)} of {n} messages from {topic} within {timeout}s (first: {got[:3]})"
                    )
                for msg in consumer.consume(n - len(got), min(left, 0.5)):
                    error = msg.error()
                    if error is not None:
                        if error.fatal():
                            raise KafkaException(error)
                        continue  # transient (a broker restarting): librdkafka retries
                    got.append(_record(msg))
            return got
        finally:
            consumer.close()

    @staticmethod
    def _partitions(consumer, topic: str, deadline: float) -> list[int]:
        last = None
        while True:
            try:
                meta = consumer.list_topics(topic, timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                found = meta.topics.get(topic)
                if found is not None and found.error is None and found.partitions:
                    return sorted(found.partitions)
                last = found.error if found is not None else "missing"
            except Exception as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {topic} not found ({last})")
            time.sleep(POLL_S)
