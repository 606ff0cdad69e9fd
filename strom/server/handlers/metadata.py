"""Metadata: brokers, controller, and every requested topic's partitions with leader, replicas and ISR."""

from __future__ import annotations

from strom.cluster import model
from strom.cluster.controller import validate_topic_name
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError
from strom.security.acl import CLUSTER_NAME, Operation
from strom.server.authorization import (
    CLUSTER,
    TOPIC,
    authorized_operations,
    create_topic_allowed,
    denied_topics,
)
from strom.server.leader_hints import fenced_successor

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 13  # v13: a top-level error code (KIP-1102), always NONE here
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
OPERATIONS_NOT_REQUESTED = -(2**31)


def partition_entries(broker, info) -> list[dict]:
    live = broker.metadata.brokers
    fenced_self = broker.broker_id if broker.replica_manager.fenced else None  # claims no leadership
    offline = broker.metadata.offline_replicas  # replicas in failed log dirs
    entries = []
    for index in sorted(info.replicas):
        replicas = info.replicas[index]
        lost = offline.get((info.name, index), ()) if offline else ()
        state = info.states.get(index)
        leader = state.leader if state and state.leader in live else -1
        epoch = state.leader_epoch if state else -1
        if state is not None and leader >= 0 and fenced_self is not None:
            # it claims no leadership, names its likely successor where it led (at no epoch: a guess
            # must not outrank the truth of the same epoch) and vouches for no other leader its
            # stale view names (strom.server.leader_hints)
            leader = fenced_successor(broker, replicas, state.isr) if leader == fenced_self else -1
            epoch = -1
        entries.append(
            {
                "error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": index,
                "leader_id": leader,
                "leader_epoch": epoch,
                "replica_nodes": replicas,
                "isr_nodes": state.isr if state else [],
                "offline_replicas": [b for b in replicas if b not in live or b in lost],
            }
        )
    return entries


def topic_entry(broker, name: str) -> dict:
    info = broker.metadata.topics.get(name)
    if info is None:
        return {
            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "name": name,
            "partitions": [],
            "topic_authorized_operations": OPERATIONS_NOT_REQUESTED,
        }
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "topic_id": info.topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partition_entries(broker, info),
        "topic_authorized_operations": OPERATIONS_NOT_REQUESTED,
    }


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    requested = field_value(request, "topics")
    if requested is None or (version == 0 and not requested):
        names = sorted(broker.metadata.topics)
    else:
        names = []
        by_id = {info.topic_id: name for name, info in broker.metadata.topics.items()}
        for topic in requested:
            name = field_value(topic, "name")
            if name is None:
                name = by_id.get(field_value(topic, "topic_id"), "")
            names.append(name)
    allow_create = field_value(request, "allow_auto_topic_creation", True)
    hidden = denied_topics(ctx, Operation.DESCRIBE, names) if broker.authorizer is not None else ()
    if hidden and (requested is None or (version == 0 and not requested)):
        names = [name for name in names if name not in hidden]  # all topics: the others are simply absent
    topics = []
    for name in names:
        if name in hidden:
            topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []})
            continue
        if name not in broker.metadata.topics:
            try:
                validate_topic_name(name)
            except KafkaError as exc:
                topics.append({"error_code": exc.error_code, "name": name, "partitions": []})
                continue
            if allow_create and broker.config.auto_create_topics_enable:
                if not create_topic_allowed(ctx, name):
                    topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []})
                    continue
                try:
                    broker.auto_create_topic(name)
                except TopicAlreadyExistsError:
                    # Another broker (or an admin client) made it and this broker's cache has not
                    # caught up yet. As Kafka: "being created", which every client retries;
                    # TOPIC_ALREADY_EXISTS here made librdkafka fail the messages it was holding.
                    broker.request_metadata_reload(model.BROKERS_TOPICS)
                    topics.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name, "partitions": []})
                    continue
                except KafkaError as exc:
                    topics.append({"error_code": exc.error_code, "name": name, "partitions": []})
                    continue
                # As Kafka, for every version: the topic is being created, so no partitions yet;
                # the client asks again. A client that deleted a topic and asks for it with
                # auto-creation on relies on this: it must see no partitions, not a new topic's.
                topics.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name, "partitions": []})
                continue
        topics.append(topic_entry(broker, name))
        if field_value(request, "include_topic_authorized_operations", False) and topics[-1]["error_code"] == 0:
            topics[-1]["topic_authorized_operations"] = authorized_operations(ctx, TOPIC, name)
    brokers = [
        {"node_id": b.broker_id, "host": address[0], "port": address[1], "rack": b.rack}
        for b in sorted(broker.metadata.brokers.values(), key=lambda b: b.broker_id)
        if (address := b.endpoint(ctx.listener)) is not None
    ]  # as Kafka: this listener's endpoints
    return build(
        response_class_for(API_KEY, version),
        {
            "throttle_time": 0,
            "brokers": brokers,
            "cluster_id": broker.metadata.cluster_id,
            "controller_id": broker.metadata.controller_id,
            "topics": topics,
            "cluster_authorized_operations": authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
            if field_value(request, "include_cluster_authorized_operations", False)
            else OPERATIONS_NOT_REQUESTED,
        },
    )
