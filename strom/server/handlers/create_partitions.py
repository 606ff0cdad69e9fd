"""CreatePartitions: grow a topic to ``count`` partitions, optionally with the new replicas' placement.

The controller validates (count must grow, assignments must name live brokers, one list per new
partition) and writes the new partitions; refreshing the metadata creates the local logs. A topic
listed twice is INVALID_REQUEST for both entries, as in Kafka. ZooKeeper not answering is
REQUEST_TIMED_OUT for that topic (see Controller.create_partitions), not a dropped connection.
"""

from __future__ import annotations

from collections import Counter

from strom.cluster import model
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError, RequestTimedOutError
from strom.security.acl import Operation
from strom.server.authorization import TOPIC, allowed
from strom.server.handlers import create_topics

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx, request):
    broker = ctx.broker
    validate_only = field_value(request, "validate_only", False)
    counts = Counter(topic.name for topic in request.topics)
    results = []
    changed: set[str] = set()  # topic znodes written: this broker re-reads just those
    too_many = _new_partitions(broker, request.topics) > create_topics.MAX_PARTITIONS_PER_REQUEST
    for topic in request.topics:
        entry = {"name": topic.name, "error_code": ErrorCode.NONE, "error_message": None}
        if too_many:  # the whole request is refused, as CreateTopics does
            entry.update(error_code=ErrorCode.POLICY_VIOLATION, error_message=create_topics.TOO_MANY_PARTITIONS)
            results.append(entry)
            continue
        if counts[topic.name] > 1:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"topic '{topic.name}' is listed twice")
            results.append(entry)
            continue
        if not allowed(ctx, Operation.ALTER, TOPIC, topic.name):
            entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            results.append(entry)
            continue
        assignment = [list(a.broker_ids) for a in topic.assignments] if topic.assignments is not None else None
        try:
            broker.controller.create_partitions(topic.name, topic.count, assignment, validate_only=validate_only)
            if not validate_only:
                changed.add(model.topic_path(topic.name))
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
            if isinstance(exc, RequestTimedOutError):  # the new partitions may be written: read the topic again
                broker.request_metadata_reload(model.topic_path(topic.name))
        results.append(entry)
    if changed:
        broker.read_back(changed)
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "results": results})


def _new_partitions(broker, topics) -> int:
    """Partitions the request would add (unknown topics add none: they fail on their own)."""
    total = 0
    for topic in topics:
        info = broker.metadata.topics.get(topic.name)
        if info is not None:
            total += max(0, topic.count - info.partition_count)
    return total
