"""AlterReplicaLogDirs: move replicas between the log dirs of this broker (KIP-113).

Answered as Kafka's ReplicaManager.alterReplicaLogDirs does, per partition: a path that is not one
of ``log.dirs`` (absolute, as configured) is LOG_DIR_NOT_FOUND; an offline destination or replica
is KAFKA_STORAGE_ERROR; a replica this broker does not host is REPLICA_NOT_AVAILABLE, and is
created in that dir if it comes later. NONE means the move started (or nothing needs moving): the
copy runs in the background (replication/log_dir_mover.py) and DescribeLogDirs shows it as a
future replica until it is swapped in. Cluster Alter is required, as in Kafka.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    broker = ctx.broker
    allowed = cluster_allowed(ctx, Operation.ALTER)
    # as Kafka: one destination per partition, the last named wins
    wanted: dict[tuple[str, int], str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                wanted[(topic.name, index)] = entry.path
    results: dict[str, list[dict]] = {}
    started = False
    for tp, path in wanted.items():
        code = ErrorCode.NONE
        if not allowed:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            try:  # compared as given, as Kafka does: a relative path or a trailing slash is no configured dir
                started |= broker.log_manager.moves.alter_log_dir(tp, path) is not None
            except KafkaError as exc:
                code = exc.error_code
        results.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code})
    if started:
        broker.log_dir_mover.wake()
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()],
        },
    )
