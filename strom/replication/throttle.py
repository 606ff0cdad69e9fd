"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73) so that a move does not starve producers.

Rates are the dynamic broker configs ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` (bytes/s; /config/brokers/<id>, else <default>; unset means
unlimited). Which replicas they apply to comes from each topic's ``leader.replication.throttled.replicas``
and ``follower.replication.throttled.replicas``: ``*`` or ``partition:broker`` pairs, of which a broker
takes those naming itself. As in Kafka, only replicas outside the ISR are throttled (a move's new
replicas catching up), never followers that keep acks=all going:
- leader side: a fetch from an out-of-sync follower of a throttled partition gets what the leader's
  quota allows now (at least one whole batch), and no records while it is spent (it still learns
  the high watermark);
- follower side: a throttled partition this broker is not in sync for is left out of its fetches
  while the follower's quota is spent.
The quota is a token bucket refilled at the rate and holding at most one second's worth, so over
any long interval the bytes moved stay within the rate plus one fetch's worth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
DYNAMIC_BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE, "replica.alter.log.dirs.io.max.bytes.per.second")
BURST_S = 1.0
ALL = -1  # "*": every partition of the topic


class Quota:
    """Bytes per second, as a token bucket; no rate means unlimited."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate: int | None = None
        self._clock = clock
        self._tokens = 0.0
        self._stamp = clock()
        self.recorded = 0  # bytes counted against this quota since start (for tools and tests)

    def set_rate(self, rate: int | None) -> None:
        if rate != self.rate:
            self._refill()
            self.rate = rate
            if rate is not None:
                self._tokens = min(self._tokens, rate * BURST_S)

    def _refill(self) -> None:
        now = self._clock()
        if self.rate is not None:
            self._tokens = min(self.rate * BURST_S, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def exceeded(self) -> bool:
        if self.rate is None:
            return False
        self._refill()
        return self._tokens <= 0

    def allowance(self) -> int:
        """Bytes that may go now (a whole batch may still overshoot it: the debt is paid back after)."""
        if self.rate is None:
            return 2**31 - 1
        self._refill()
        return max(0, int(self._tokens))

    def record(self, size: int) -> None:
        self.recorded += size
        if self.rate is not None:
            self._refill()
            self._tokens -= size


def parse_replicas(text: str, broker_id: int) -> set[int]:
    """The partitions a throttled-replicas value names for ``broker_id`` ({ALL} for "*")."""
    text = text.strip()
    if text == "*":
        return {ALL}
    found = set()
    for item in text.split(","):
        partition, _, broker = item.strip().partition(":")
        try:
            if int(broker) == broker_id:
                found.add(int(partition))
        except ValueError:
            continue  # validated when set; an unparsable entry throttles nothing
    return found


def _rate(configs: dict[str, dict[str, str]], broker_id: int, key: str) -> int | None:
    for entity in (str(broker_id), "<default>"):
        value = configs.get(entity, {}).get(key)
        if value is not None:
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


class ReplicationQuotas:
    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.leader = Quota()
        self.follower = Quota()
        self._leader_throttled: dict[str, set[int]] = {}
        self._follower_throttled: dict[str, set[int]] = {}

    def update(self, metadata: MetadataCache) -> None:
        """Re-read rates and throttled replicas after a metadata change."""
        self.leader.set_rate(_rate(metadata.broker_configs, self.broker_id, LEADER_RATE))
        self.follower.set_rate(_rate(metadata.broker_configs, self.broker_id, FOLLOWER_RATE))
        leaders: dict[str, set[int]] = {}
        followers: dict[str, set[int]] = {}
        for name, topic in metadata.topics.items():
            for key, into in ((LEADER_REPLICAS, leaders), (FOLLOWER_REPLICAS, followers)):
                value = topic.configs.get(key)
                if value:
                    partitions = parse_replicas(value, self.broker_id)
                    if partitions:
                        into[name] = partitions
        self._leader_throttled, self._follower_throttled = leaders, followers

    @staticmethod
    def _named(throttled: dict[str, set[int]], partition: Partition) -> bool:
        found = throttled.get(partition.topic)
        return found is not None and (partition.index in found or ALL in found)

    def leader_quota(self, partition: Partition, replica_id: int) -> Quota | None:
        """The quota a follower's read of ``partition`` counts against, or None when it is not throttled."""
        if self.leader.rate is None or replica_id in partition.isr:
            return None
        return self.leader if self._named(self._leader_throttled, partition) else None

    def follower_quota(self, partition: Partition) -> Quota | None:
        """The quota this broker's fetches of ``partition`` count against, or None when not throttled."""
        if self.follower.rate is None or self.broker_id in partition.isr:
            return None
        return self.follower if self._named(self._follower_throttled, partition) else None

    @property
    def follower_throttling(self) -> bool:
        """Whether any partition this broker follows may be held back (fetchers then check each one)."""
        return self.follower.rate is not None and bool(self._follower_throttled)

    def follower_held_back(self, partition: Partition) -> bool:
        quota = self.follower_quota(partition)
        return quota is not None and quota.exceeded()
