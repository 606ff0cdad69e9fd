"""A transactions-v2 producer made of raw requests (no client installed here negotiates KIP-890
part 2): what a Kafka 4.x Java producer sends once transaction.version 2 is finalized. It talks to
the coordinators FindCoordinator names and to each partition's leader, so it works on one broker
and on three. Every retry is bounded.
"""

from __future__ import annotations

import time

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from tests.integration.clients import WAIT_S, RawClient

RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NOT_ENOUGH_REPLICAS,
}


class TxnProducer:
    """The requests of a transactions-v2 producer: one connection per broker, every retry bounded."""

    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000):
        self.bootstrap = RawClient(bootstrap.split(",")[0])
        self.clients: dict[int, RawClient] = {}
        self.transactional_id = transactional_id
        self.sequences: dict[tuple[str, int], int] = {}
        self.client = self.coordinator(1, transactional_id)
        answer = self.retry(
            lambda: self.client.request(
                ApiKey.INIT_PRODUCER_ID,
                5,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout": timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
        )
        assert answer.error_code == ErrorCode.NONE
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch

    def broker(self, node_id: int) -> RawClient:
        if node_id not in self.clients:
            brokers = self.bootstrap.request(ApiKey.METADATA, 12, {"topics": []}).brokers
            address = next(f"{b.host}:{b.port}" for b in brokers if b.node_id == node_id)
            self.clients[node_id] = RawClient(address)
        return self.clients[node_id]

    def coordinator(self, key_type: int, key: str) -> RawClient:
        """The transaction (1) or group (0) coordinator; the first ask creates its internal topic."""
        found = self.retry(
            lambda: self.bootstrap.request(
                ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}
            ),
            code_of=lambda answer: answer.coordinators[0].error_code,
        )
        assert found.coordinators[0].error_code == ErrorCode.NONE
        return self.broker(found.coordinators[0].node_id)

    def leader(self, topic: str, partition: int) -> RawClient:
        topics = self.bootstrap.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics
        return self.broker(next(p.leader_id for p in topics[0].partitions if p.partition_index == partition))

    @staticmethod
    def retry(call, codes=RETRIABLE, code_of=lambda answer: answer.error_code):
        deadline = time.monotonic() + WAIT_S
        while True:
            answer = call()
            if code_of(answer) not in codes or time.monotonic() > deadline:
                return answer
            time.sleep(0.05)

    def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None) -> tuple[int, int]:
        """(error code, base offset) of a transactional Produce v12 (``epoch``: pose as an older instance)."""
        sequence = self.sequences.get((topic, partition), 0)
        batch = build_batch(
            [NewRecord(v) for v in values],
            producer_id=self.producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=sequence,
            transactional=True,
        )
        body = {
            "transactional_id": self.transactional_id,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        leader = self.leader(topic, partition)
        answer = self.retry(lambda: leader.request(ApiKey.PRODUCE, 12, body).responses[0].partition_responses[0])
        if answer.error_code == ErrorCode.NONE:
            self.sequences[(topic, partition)] = sequence + len(values)
        return answer.error_code, answer.base_offset

    def end(self, commit: bool, epoch: int | None = None, version: int = 5):
        answer = self.retry(
            lambda: self.client.request(
                ApiKey.END_TXN,
                version,
                {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.producer_id,
                    "producer_epoch": self.epoch if epoch is None else epoch,
                    "committed": commit,
                },
            )
        )
        if answer.error_code == ErrorCode.NONE and version >= 5:
            assert answer.producer_id == self.producer_id
            self.epoch = answer.producer_epoch
            self.sequences.clear()  # a new epoch starts its sequences at 0
        return answer

    def wait_markers(self) -> None:
        """Until the coordinator has written the last transaction's markers (EndTxn answers before)."""
        done = {"CompleteCommit", "CompleteAbort", "Empty"}

        def state() -> str:
            answer = self.client.request(
                ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [self.transactional_id]}
            )
            return answer.transaction_states[0].transaction_state

        deadline = time.monotonic() + WAIT_S
        while state() not in done:
            assert time.monotonic() < deadline, "the markers were not written"
            time.sleep(0.02)

    def commit_offsets(self, group: str, topic: str, offset: int):
        body = {
            "transactional_id": self.transactional_id,
            "group_id": group,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1}],
                }
            ],
        }
        group_coordinator = self.coordinator(0, group)
        # Kafka's TxnOffsetCommitHandler retries UNKNOWN_TOPIC_OR_PARTITION with the same
        # coordinator: the group's __consumer_offsets partition may not be known to the
        # transaction coordinator yet (a full run on 3 brokers answered it once)
        return (
            self.retry(
                lambda: group_coordinator.request(ApiKey.TXN_OFFSET_COMMIT, 5, body),
                codes=RETRIABLE | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
                code_of=lambda answer: answer.topics[0].partitions[0].error_code,
            )
            .topics[0]
            .partitions[0]
            .error_code
        )

    def close(self) -> None:
        self.bootstrap.close()
        for client in self.clients.values():
            client.close()
