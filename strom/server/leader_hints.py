"""KIP-951 leader discovery: where a partition's leader is now, in the answer that says "not me".

Produce v10+ answering NOT_LEADER_OR_FOLLOWER, and Fetch v16+ answering NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH, carry the partition's current leader and epoch (a tagged field of the partition:
tag 0 in Produce, tag 1 in Fetch, whose tag 0 is the diverging epoch) and
that leader's endpoint on the listener the request came in on (tag 0 of the response), so the
client goes straight there instead of asking Metadata first. The leader is this broker's view,
as Kafka's getCurrentLeader takes it: the local replica's leader and epoch when it hosts one, else
the metadata cache's; -1 when unknown, with no endpoint.

Only error answers pay for this: the hot paths encode ``NO_TAGS`` as before and call in here
only for a partition whose error asks for a hint.

A fenced broker (one that cannot confirm its ZooKeeper session, see ReplicaManager.fenced)
hints no leader here: its view is stale. Its Metadata instead names, for a partition it led, the
replica the controller will elect in its place (``fenced_successor``), at leader epoch -1.
Answering "no leader" (-1) there strands a client that has no connection to another broker, as
librdkafka's sparse connections leave a producer that writes only to this broker's partitions:
it asks this broker's Metadata again and again, since it is the only one it talks to, and hears
-1 each time (measured: no write acknowledged in a 15 s cut, strom.chaos.fenced_leader). Named
a successor, the client connects to it, and from then on hears the truth from a broker that has
it. The guess carries no epoch, so it never outranks the truth of the same epoch: when the
session survives and no election follows, the client goes back to this broker as soon as any
broker names it again (with the guess at the old epoch, the consumer group of
tests/cluster/test_chaos.py had not read everything back 90 s after the heal in 4 of 5 runs). A fenced broker also names no leader
for the partitions its stale view gives to others: when ZooKeeper is out for every broker, all
are fenced, and two fenced brokers naming each other bounced clients between them ten times a
second (that test's idempotent producers then timed their batches out).
"""

from __future__ import annotations

import struct
from typing import Any

from strom.protocol.errors import ErrorCode
from strom.server import wire

PRODUCE_HINT_VERSION = 10
FETCH_HINT_VERSION = 16
PRODUCE_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
FETCH_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})

_LEADER = struct.Struct(">ii")
_I32 = struct.Struct(">i")
# one tagged field of 9 bytes: leader id, leader epoch, the struct's own empty tag section
_PRODUCE_LEADER_TAG = wire.uvarint(1) + wire.uvarint(0) + wire.uvarint(_LEADER.size + 1)
_FETCH_LEADER_TAG = wire.uvarint(1) + wire.uvarint(1) + wire.uvarint(_LEADER.size + 1)


def current_leader(broker: Any, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of ``topic``-``index`` as this broker sees it; (-1, -1) if unknown."""
    replicas = broker.replica_manager
    partition = replicas.partitions.get((topic, index))
    if partition is not None and partition.leader_id >= 0:
        leader, epoch = partition.leader_id, partition.leader_epoch
    else:
        info = broker.metadata.topics.get(topic)
        state = info.states.get(index) if info is not None else None
        if state is None:
            return -1, -1
        leader, epoch = state.leader, state.leader_epoch
    if replicas.fenced:
        leader = -1  # its view is stale: no hint (its Metadata names the successor, at no epoch)
    elif leader not in broker.metadata.brokers:
        leader = -1
    return leader, epoch


def fenced_successor(broker: Any, replicas: list[int], isr: list[int]) -> int:
    """Where a fenced broker sends the clients of a partition it led: the first other live replica,
    in preference order, in the ISR it last knew; the controller elects the same one unless the ISR
    changed meanwhile (strom.cluster.controller's ``_elect``). -1 when there is none."""
    live = broker.metadata.brokers
    for candidate in replicas:
        if candidate != broker.broker_id and candidate in isr and candidate in live:
            return candidate
    return -1


class LeaderHints:
    """The hints of one response: each hinted partition's tag section, then the endpoints'."""

    __slots__ = ("_broker", "_listener", "_leaders")

    def __init__(self, ctx: Any) -> None:
        self._broker = ctx.broker
        self._listener = ctx.listener
        self._leaders: set[int] = set()

    def _leader(self, topic: str | None, index: int) -> bytes:
        leader, epoch = current_leader(self._broker, topic, index) if topic is not None else (-1, -1)
        if leader >= 0:
            self._leaders.add(leader)
        return _LEADER.pack(leader, epoch) + wire.NO_TAGS

    def partition_tags(self, topic: str, index: int) -> bytes:
        """A Produce partition's tag section: CurrentLeader."""
        return _PRODUCE_LEADER_TAG + self._leader(topic, index)

    def fetch_partition_tags(self, topic_key: Any, index: int) -> bytes:
        """A Fetch partition's tag section: CurrentLeader; the topic is named by id from v13."""
        topic = topic_key if isinstance(topic_key, str) else self._broker.topic_name_by_id(topic_key)
        return _FETCH_LEADER_TAG + self._leader(topic, index)

    def response_tags(self) -> bytes:
        """The response's tag section: tag 0, NodeEndpoints of the leaders named above (none: no tags)."""
        nodes = []
        brokers = self._broker.metadata.brokers
        for broker_id in sorted(self._leaders):
            registration = brokers.get(broker_id)
            address = registration.endpoint(self._listener) if registration is not None else None
            if address is not None:
                nodes.append(
                    _I32.pack(broker_id)
                    + wire.string(address[0], True)
                    + _I32.pack(address[1])
                    + wire.nullable_string(registration.rack, True)
                    + wire.NO_TAGS
                )
        if not nodes:
            return wire.NO_TAGS
        field = wire.array_length(len(nodes), True) + b"".join(nodes)
        return wire.uvarint(1) + wire.uvarint(0) + wire.uvarint(len(field)) + field
