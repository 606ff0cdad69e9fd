"""ElectLeaders (KIP-460): move partition leadership to the preferred replica, or elect uncleanly.

Preferred (type 0): the first assigned replica becomes leader if it is alive and in the ISR;
ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise.
Unclean (type 1): only for a partition whose leader is gone (ELECTION_NOT_NEEDED otherwise): a live
ISR member if there is one, else the first live replica with the ISR reset to it (committed
messages it lacks are lost, which is what the operator asked for); ELIGIBLE_LEADERS_NOT_AVAILABLE
when no replica is alive. v0 has no election type and means preferred.

librdkafka sends this to the controller named in Metadata, but that can be stale during a
controller change, so any broker answers it: each change is a compare-and-set of the partition's
state znode, read fresh from the store, exactly as the controller writes it, so a concurrent
controller write makes this one retry instead of being overwritten. With no partitions listed
(null) every partition is considered and, as in Kafka, ELECTION_NOT_NEEDED results are left out.
"""

from __future__ import annotations

import logging

from strom.cluster import model
from strom.cluster.model import PartitionState
from strom.cluster.store import BadVersionError, NoNodeError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.ELECT_LEADERS
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED = 0
UNCLEAN = 1
CAS_ATTEMPTS = 5

log = logging.getLogger("strom.controller")


def elect(
    store, topic: str, partition: int, replicas: list[int], live: set[int], election_type: int, controller_epoch: int
) -> tuple[int, str | None]:
    """One partition's election against the store; returns (error code, message)."""
    path = model.partition_state_path(topic, partition)
    for _ in range(CAS_ATTEMPTS):
        try:
            data, version = store.get(path)
        except NoNodeError:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} has no leader state yet"
        state = PartitionState.from_json(data)
        decided = decide(state, replicas, live, election_type)
        if isinstance(decided, tuple):
            return decided
        new = PartitionState(decided[0], state.leader_epoch + 1, decided[1], controller_epoch)
        try:
            store.set(path, new.to_json(), version)
        except BadVersionError:
            continue  # the controller or a leader changed it meanwhile: decide again on the new state
        kind = "preferred" if election_type == PREFERRED else "unclean"
        log.info(
            "%s leader election for %s-%d: leader %d -> %d (epoch %d, isr %s)",
            kind,
            topic,
            partition,
            state.leader,
            new.leader,
            new.leader_epoch,
            new.isr,
        )
        return ErrorCode.NONE, None
    return ErrorCode.REQUEST_TIMED_OUT, f"{topic}-{partition} kept changing during the election"


def decide(state: PartitionState, replicas: list[int], live: set[int], election_type: int):
    """A (leader, isr) list to write, or an (error code, message) tuple when nothing is written."""
    if election_type == PREFERRED:
        preferred = replicas[0]
        if state.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition"
        if preferred not in live or preferred not in state.isr:
            why = "not alive" if preferred not in live else f"not in the ISR {state.isr}"
            return (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                "Failed to elect leader for partition under strategy "
                f"PreferredReplicaPartitionLeaderElectionStrategy: preferred replica {preferred} is {why}",
            )
        return [preferred, list(state.isr)]
    if state.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition"
    live_isr = [b for b in replicas if b in state.isr and b in live]
    if live_isr:
        return [live_isr[0], [b for b in state.isr if b in live]]
    alive = [b for b in replicas if b in live]
    if not alive:
        return (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition under strategy OfflinePartitionLeaderElectionStrategy: "
            f"none of the replicas {replicas} is alive",
        )
    return [alive[0], [alive[0]]]


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    election_type = field_value(request, "election_type", PREFERRED)
    requested = field_value(request, "topic_partitions")
    metadata = broker.metadata
    everything = requested is None
    if everything:
        wanted = [(name, sorted(info.replicas)) for name, info in sorted(metadata.topics.items())]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in requested]
    results: dict[str, list[dict]] = {}
    top_error = ErrorCode.NONE
    changed: set[str] = set()  # states written: this broker re-reads just those
    if not cluster_allowed(ctx, Operation.ALTER):
        return build(
            response_class_for(API_KEY, version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": [
                    {
                        "topic": t,
                        "partition_result": [
                            {
                                "partition_id": p,
                                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                "error_message": "Cluster authorization failed.",
                            }
                            for p in ps
                        ],
                    }
                    for t, ps in wanted
                ],
            },
        )
    if election_type not in (PREFERRED, UNCLEAN):
        top_error = ErrorCode.INVALID_REQUEST
        wanted = []
    controller_epoch = broker.controller.epoch if broker.controller.is_active else _controller_epoch(broker.store)
    live = set(metadata.brokers)
    for topic, partitions in wanted:
        info = metadata.topics.get(topic)
        for partition in partitions:
            code: int
            message: str | None
            if info is None or partition not in info.replicas:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist"
            else:
                code, message = elect(
                    broker.store, topic, partition, info.replicas[partition], live, election_type, controller_epoch
                )
            if everything and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            if code == ErrorCode.NONE:
                changed.add(model.partition_state_path(topic, partition))
            results.setdefault(topic, []).append(
                {"partition_id": partition, "error_code": code, "error_message": message}
            )
    if changed:
        broker.read_back(changed)  # this broker's Metadata answers show the new leaders at once
    return build(
        response_class_for(API_KEY, version),
        {
            "throttle_time": 0,
            "error_code": top_error,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in results.items()],
        },
    )


def _controller_epoch(store) -> int:
    found = store.get_or_none(model.CONTROLLER_EPOCH)
    try:
        return int(found[0]) if found else 0
    except ValueError:
        return 0
