"""Transactions v1 against v2 (KIP-890 part 2): what a transaction costs the producer in each protocol.

    python -m strom.bench.txn_v2 [--bootstrap-server H:P] [--transactions 300] [--partitions 4]
                                 [--records 10] [--size 100] [--rounds 3] [--record]

Without --bootstrap-server it starts a throwaway broker on 127.0.0.1 (port 0, temp data dir). No
installed client speaks transactions v2, so both protocols are spoken here with raw requests over
strom's own client connection, one transaction after another, each writing --records values of
--size bytes to each of --partitions partitions of one topic (one Produce request) and committing:

* v1: AddPartitionsToTxn v3, Produce v11, EndTxn v4 (the epoch stays);
* v2: Produce v12 (the leader adds the partitions), EndTxn v5 (the answer bumps the epoch).

Each round runs both, alternating; the figures are the medians over rounds of each run's p50 and
p99 transaction time (from the first request to EndTxn's answer) and transactions per second.
Prints figures and asserts nothing about time (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid

from strom.bench.groups import create_topic
from strom.bench.results import add_record_argument, record_if_asked
from strom.cli.demo import EmbeddedBroker
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from strom.replication.client import BrokerClient

TIMEOUT_S = 30.0
RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


class RawTransactions:
    """One transactional id over one connection (a single broker leads everything here)."""

    def __init__(self, client: BrokerClient, topic: str, partitions: int, records: int, size: int):
        self.client, self.topic, self.partitions = client, topic, partitions
        self.values = [os.urandom(size) for _ in range(records)]
        self.transactional_id = f"bench-txn-v2-{uuid.uuid4().hex[:8]}"
        self.producer_id = self.epoch = -1
        self.sequence = 0

    async def call(self, api_key: int, version: int, values: dict, code_of=lambda r: r.error_code):
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            response = await self.client.request(api_key, version, values, TIMEOUT_S)
            code = code_of(response)
            if code == ErrorCode.NONE:
                return response
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise RuntimeError(f"api {api_key} v{version}: {ErrorCode(code).name}")
            await asyncio.sleep(0.01)

    async def init(self) -> None:
        await self.call(
            ApiKey.FIND_COORDINATOR,
            4,
            {"key_type": 1, "coordinator_keys": [self.transactional_id]},
            code_of=lambda r: r.coordinators[0].error_code,
        )
        answer = await self.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {"transactional_id": self.transactional_id, "transaction_timeout": 60000},
        )
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch

    async def produce(self, version: int) -> None:
        data = []
        for partition in range(self.partitions):
            batch = build_batch(
                [NewRecord(v) for v in self.values],
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                base_sequence=self.sequence,
                transactional=True,
            )
            data.append({"index": partition, "records": batch})
        values = {
            "transactional_id": self.transactional_id,
            "acks": -1,
            "timeout": 30000,
            "topic_data": [{"name": self.topic, "partition_data": data}],
        }

        def worst(response) -> int:
            codes = [p.error_code for t in response.responses for p in t.partition_responses]
            return next((c for c in codes if c), ErrorCode.NONE)

        await self.call(ApiKey.PRODUCE, version, values, code_of=worst)
        self.sequence += len(self.values)

    async def transaction_v1(self) -> None:
        await self.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": self.topic, "partitions": list(range(self.partitions))}],
            },
            code_of=lambda r: next(
                (p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition),
                ErrorCode.NONE,
            ),
        )
        await self.produce(11)
        await self._end(4)

    async def transaction_v2(self) -> None:
        await self.produce(12)
        answer = await self._end(5)
        if answer.producer_epoch != self.epoch:  # the bump: sequences start again
            self.producer_id, self.epoch, self.sequence = answer.producer_id, answer.producer_epoch, 0

    async def _end(self, version: int):
        return await self.call(
            ApiKey.END_TXN,
            version,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "committed": True,
            },
        )


async def run(bootstrap: str, protocol: int, transactions: int, partitions: int, records: int, size: int) -> dict:
    topic = create_topic(bootstrap, partitions, prefix=f"bench-txn-v{protocol}")
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    client = BrokerClient(host, int(port), "strom-bench-txn-v2", TIMEOUT_S)
    try:
        txns = RawTransactions(client, topic, partitions, records, size)
        await txns.init()
        one = txns.transaction_v2 if protocol == 2 else txns.transaction_v1
        times = []
        started = time.perf_counter()
        for _ in range(transactions):
            began = time.perf_counter()
            await one()
            times.append((time.perf_counter() - began) * 1000)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))],
        "txn_per_s": transactions / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m strom.bench.txn_v2", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", help="a running broker (default: start one)")
    parser.add_argument("--transactions", type=int, default=300, help="transactions per run")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records", type=int, default=10, help="records per partition per transaction")
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--rounds", type=int, default=3)
    add_record_argument(parser)
    args = parser.parse_args(argv)
    broker = None
    if args.bootstrap_server is None:
        broker = EmbeddedBroker(os.path.join(tempfile.mkdtemp(prefix="strom-bench-txn-v2-"), "data")).start()
    bootstrap = args.bootstrap_server or broker.bootstrap  # type: ignore[union-attr]
    results: dict[int, list[dict]] = {1: [], 2: []}
    try:
        for _ in range(args.rounds):
            for protocol in (1, 2):
                results[protocol].append(
                    asyncio.run(run(bootstrap, protocol, args.transactions, args.partitions, args.records, args.size))
                )
    finally:
        if broker is not None:
            broker.stop()
    print(
        f"transactions v1 against v2: {args.transactions} transactions a run, each {args.records} x {args.size} B "
        f"to each of {args.partitions} partitions, acks=all, one connection, {args.rounds} round(s) (medians)"
    )
    print(f"{'protocol':50} {'p50 ms':>8} {'p99 ms':>8} {'txn/s':>8}")
    labels = {1: "v1: AddPartitionsToTxn + Produce v11 + EndTxn v4", 2: "v2: Produce v12 + EndTxn v5"}
    recorded: dict[str, tuple[float, str]] = {}
    for protocol, runs in results.items():
        figures = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{labels[protocol]:50} {figures['p50_ms']:8.2f} {figures['p99_ms']:8.2f} {figures['txn_per_s']:8.0f}")
        recorded[f"v{protocol} transaction p50"] = (figures["p50_ms"], "ms")
        recorded[f"v{protocol} transaction p99"] = (figures["p99_ms"], "ms")
        recorded[f"v{protocol} transactions per second"] = (figures["txn_per_s"], "txn/s")
    record_if_asked(args, "txn_v2", recorded, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
