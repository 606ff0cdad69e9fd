"""CreateTopics: validated by the controller; -1 partitions / replication factor mean the broker defaults."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError
from strom.server.authorization import create_topic_allowed

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 0
MAX_VERSION = 7


# As Kafka's controller (KRaft's MAX_PARTITIONS_PER_BATCH): one request may create at most this
# many partitions. A 60-byte request asking for 2**31-1 would otherwise hold the broker for hours.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def requested_partitions(topics, default: int) -> int:
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        else:
            total += max(0, topic.num_partitions if topic.num_partitions != -1 else default)
    return total


def handle(ctx, request):
    broker = ctx.broker
    validate_only = field_value(request, "validate_only", False)
    results = []
    seen: set[str] = set()
    too_many = requested_partitions(request.topics, broker.config.num_partitions) > MAX_PARTITIONS_PER_REQUEST
    for topic in request.topics:
        entry = {
            "name": topic.name,
            "error_code": 0,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        if too_many:  # the whole request is refused, as in Kafka
            entry.update(error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_MANY_PARTITIONS)
            results.append(entry)
            continue
        if topic.name in seen:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"topic '{topic.name}' is listed twice")
            results.append(entry)
            continue
        seen.add(topic.name)
        if not create_topic_allowed(ctx, topic.name):
            entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            results.append(entry)
            continue
        partitions = topic.num_partitions if topic.num_partitions != -1 else broker.config.num_partitions
        factor = (
            topic.replication_factor if topic.replication_factor != -1 else broker.config.default_replication_factor
        )
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        try:
            created = broker.create_topic(
                topic.name, partitions, factor, configs, assignment or None, validate_only=validate_only
            )
            entry.update(
                num_partitions=len(created.partitions),
                replication_factor=len(created.partitions[0]),
                topic_id=created.topic_id,
            )
            effective = broker.controller.validate_configs(configs).to_topic_configs()
            entry["configs"] = [
                {
                    "name": k,
                    "value": v,
                    "read_only": False,
                    "config_source": 1 if k in configs else 5,
                    "is_sensitive": False,
                }
                for k, v in sorted(effective.items())
            ]
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": results})
