"""The checks handlers make: (resource, operation) pairs as Kafka's documentation lists them per API.

Every function starts with ``ctx.broker.authorizer is None`` (no authorizer configured): one
attribute test, so a broker without ACLs pays nothing more on its hot paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from strom.protocol.errors import ErrorCode
from strom.security.acl import CLUSTER_NAME, Operation, ResourceType
from strom.security.authorizer import host_of

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID

TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def allowed(ctx: Any, operation: Operation, resource_type: ResourceType, name: str, log_denied: bool = True) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, host_of(ctx.peer), operation, resource_type, name, ctx.peer, log_denied)


def cluster_allowed(ctx: Any, operation: Operation, log_denied: bool = True) -> bool:
    return allowed(ctx, operation, CLUSTER, CLUSTER_NAME, log_denied)


def denied_topics(ctx: Any, operation: Operation, names: Iterable[str]) -> set[str]:
    """The topics among ``names`` the principal may not ``operation`` (empty without an authorizer)."""
    if ctx.broker.authorizer is None:
        return set()
    return {name for name in set(names) if not allowed(ctx, operation, TOPIC, name)}


def create_topic_allowed(ctx: Any, name: str) -> bool:
    """CreateTopics and auto-creation: Create on the cluster, or else on the topic (Kafka's order)."""
    return cluster_allowed(ctx, Operation.CREATE, log_denied=False) or allowed(ctx, Operation.CREATE, TOPIC, name)


TOPIC_OPERATIONS = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DELETE,
    Operation.ALTER,
    Operation.DESCRIBE,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
)
GROUP_OPERATIONS = (Operation.READ, Operation.DELETE, Operation.DESCRIBE)
CLUSTER_OPERATIONS = (
    Operation.CREATE,
    Operation.ALTER,
    Operation.DESCRIBE,
    Operation.CLUSTER_ACTION,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
    Operation.IDEMPOTENT_WRITE,
)


def authorized_operations(ctx: Any, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit set; without an authorizer every operation the resource knows (as Kafka reports)."""
    operations = {TOPIC: TOPIC_OPERATIONS, GROUP: GROUP_OPERATIONS, CLUSTER: CLUSTER_OPERATIONS}[resource_type]
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return sum(1 << int(op) for op in operations)
    return authorizer.authorized_operations(ctx.principal, host_of(ctx.peer), resource_type, name, operations)


def produce_denials(ctx: Any, request: Any) -> dict[tuple[str, int], int] | None:
    """Produce: Write on the TransactionalId for a transactional producer (else every partition
    fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers), Write on each topic.
    None when all is allowed: this runs for every produce request, so it stays a plain loop."""
    authorizer = ctx.broker.authorizer
    principal, peer = ctx.principal, ctx.peer
    host = host_of(peer)
    if request.transactional_id is not None and not authorizer.authorize(
        principal, host, Operation.WRITE, TRANSACTIONAL_ID, request.transactional_id, peer
    ):
        return {(name, index): TXN_DENIED for name, data in request.topic_data for index, _ in data}
    denied = None
    for name, data in request.topic_data:
        if not authorizer.authorize(principal, host, Operation.WRITE, TOPIC, name, peer):
            if denied is None:
                denied = {}
            for index, _ in data:
                denied[(name, index)] = TOPIC_DENIED
    return denied


def fetch_denials(ctx: Any, request: Any, replica_id: int) -> set[str]:
    """Fetch: a follower (replica_id >= 0) needs ClusterAction on the cluster, else every partition
    fails with TOPIC_AUTHORIZATION_FAILED as in Kafka; a consumer needs Read on each topic."""
    names = [topic.topic for topic in request.topics if topic.topic is not None]  # None: an unknown topic id
    if replica_id >= 0:
        return set() if cluster_allowed(ctx, Operation.CLUSTER_ACTION) else set(names)
    return denied_topics(ctx, Operation.READ, names)


def idempotent_write_allowed(ctx: Any) -> bool:
    """InitProducerId without a transactional id: IdempotentWrite on the cluster, or Write on some
    topic (KIP-679: a principal that may write anywhere may be idempotent)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or cluster_allowed(ctx, Operation.IDEMPOTENT_WRITE, log_denied=False):
        return True
    if authorizer.authorize_any(ctx.principal, host_of(ctx.peer), Operation.WRITE, TOPIC):
        return True
    return cluster_allowed(ctx, Operation.IDEMPOTENT_WRITE)  # logs the denial


def group_allowed(ctx: Any, operation: Operation, group_id: str) -> bool:
    return allowed(ctx, operation, GROUP, group_id)


def txn_allowed(ctx: Any, operation: Operation, transactional_id: str | None) -> bool:
    return transactional_id is None or allowed(ctx, operation, TRANSACTIONAL_ID, transactional_id)


def offset_commit_denials(
    ctx: Any, group_id: str, topics: Any, transactional_id: str | None = None
) -> dict[tuple[str, int], int]:
    """OffsetCommit/TxnOffsetCommit: (Write on the TransactionalId,) Read on the group, Read on each
    topic; every partition gets the first refusal, as Kafka answers."""
    partitions = [(topic.name, p.partition_index) for topic in topics for p in topic.partitions]
    if ctx.broker.authorizer is None:
        return {}
    if transactional_id is not None and not txn_allowed(ctx, Operation.WRITE, transactional_id):
        return dict.fromkeys(partitions, TXN_DENIED)
    if not group_allowed(ctx, Operation.READ, group_id):
        return dict.fromkeys(partitions, GROUP_DENIED)
    denied = denied_topics(ctx, Operation.READ, (name for name, _ in partitions))
    return {tp: TOPIC_DENIED for tp in partitions if tp[0] in denied}


CONFIG_TOPIC = 2  # ConfigResource types of DescribeConfigs/AlterConfigs
CONFIG_GROUP = 32


def config_denial(ctx: Any, operation: Operation, resource_type: int, name: str) -> int | None:
    """DescribeConfigs/AlterConfigs: the operation on the topic, or on the cluster for a broker or
    its loggers; the error code of a refusal, or None."""
    if ctx.broker.authorizer is None:
        return None
    if resource_type == CONFIG_TOPIC:
        return None if allowed(ctx, operation, TOPIC, name) else TOPIC_DENIED
    if resource_type == CONFIG_GROUP:  # KIP-848 group configs: the operation on the group
        return None if allowed(ctx, operation, GROUP, name) else GROUP_DENIED
    return None if cluster_allowed(ctx, operation) else CLUSTER_DENIED


def refusal_message(code: int) -> str:
    return {
        TOPIC_DENIED: "Topic authorization failed.",
        GROUP_DENIED: "Group authorization failed.",
        CLUSTER_DENIED: "Cluster authorization failed.",
        TXN_DENIED: "Transactional Id authorization failed.",
    }.get(code, "Authorization failed.")
