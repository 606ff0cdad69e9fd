"""Producer id allocation in blocks reserved through the metadata store, as Kafka does in ZooKeeper."""

from __future__ import annotations

import json

from strom.cluster.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int):
        self.store = store
        self.broker_id = broker_id
        self._next = 0
        self._end = -1  # exclusive end of the reserved block

    def _reserve_block(self) -> None:
        for _ in range(100):  # compare-and-set loop: other brokers may reserve concurrently
            try:
                data, version = self.store.get(BLOCK_PATH)
                start = int(json.loads(data)["block_end"]) + 1
            except NoNodeError:
                data, version, start = None, -1, 0
            block = json.dumps(
                {
                    "version": 1,
                    "broker": self.broker_id,
                    "block_start": str(start),
                    "block_end": str(start + BLOCK_SIZE - 1),
                }
            ).encode()
            try:
                if data is None:
                    self.store.create(BLOCK_PATH, block)
                else:
                    self.store.set(BLOCK_PATH, block, version)
            except (BadVersionError, NodeExistsError):
                continue
            self._next, self._end = start, start + BLOCK_SIZE
            return
        raise RuntimeError("could not reserve a producer id block")

    def next_id(self) -> int:
        if self._next >= self._end:
            self._reserve_block()
        producer_id = self._next
        self._next += 1
        return producer_id
