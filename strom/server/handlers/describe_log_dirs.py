"""DescribeLogDirs: each log dir with the size of every partition in it; v4 adds the disk's size and free space.

v5 (KIP-1066) says whether a dir is cordoned (no new replicas placed in it): strom has no cordoning,
so no dir ever is.

Null topics means every partition. A replica moving to another log dir (AlterReplicaLogDirs) is
listed twice, as in Kafka: in its current dir, and in the destination with is_future_key true and
offset_lag the offsets its copy still lacks (the current log end minus the copy's). A log dir
that failed (a full disk, an I/O error) answers KAFKA_STORAGE_ERROR, as in Kafka.
"""

from __future__ import annotations

import os

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
MIN_VERSION = 0
MAX_VERSION = 5


def _disk(path: str) -> tuple[int, int]:
    try:
        stat = os.statvfs(path)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


def handle(ctx, request):
    manager = ctx.broker.log_manager
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {"throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []},
        )
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[dict]]] = {d: {} for d in manager.log_dirs}
    for tp, partition_log in sorted(manager.logs.items()):
        if wanted is not None and tp not in wanted:
            continue
        log_dir = manager.log_dir_of(tp)
        by_dir.setdefault(log_dir, {}).setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "partition_size": partition_log.size_in_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    for tp, future in sorted(manager.moves.future_logs.items()):
        current = manager.logs.get(tp)
        if (wanted is not None and tp not in wanted) or current is None:
            continue
        by_dir.setdefault(manager.moves.future_log_dir_of(tp), {}).setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "partition_size": future.size_in_bytes,
                "offset_lag": max(current.log_end_offset - future.log_end_offset, 0),
                "is_future_key": True,
            }
        )
    results = []
    for log_dir, topics in by_dir.items():
        total, usable = _disk(log_dir)
        if log_dir in manager.offline_dirs:  # as Kafka: a failed dir is listed with its error and nothing in it
            results.append(
                {
                    "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                    "log_dir": log_dir,
                    "total_bytes": total,
                    "usable_bytes": usable,
                    "is_cordoned": False,
                    "topics": [],
                }
            )
            continue
        results.append(
            {
                "error_code": ErrorCode.NONE,
                "log_dir": log_dir,
                "total_bytes": total,
                "usable_bytes": usable,
                "is_cordoned": False,
                "topics": [{"name": name, "partitions": parts} for name, parts in sorted(topics.items())],
            }
        )
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "error_code": ErrorCode.NONE, "results": results},
    )
