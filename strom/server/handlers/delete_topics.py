"""DeleteTopics: the controller removes the topic from the store; refreshing the metadata deletes the logs.

v6 (KIP-516) may name a topic by id instead of by name. The checks and their order are Kafka's:
delete.topic.enable=false answers INVALID_REQUEST before v3 and TOPIC_DELETION_DISABLED from v3; a
name or id listed twice, or an entry with both or neither, is INVALID_REQUEST; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION and an unknown id UNKNOWN_TOPIC_ID. Internal topics are not refused:
Kafka's broker deletes __consumer_offsets when asked (only the kafka-topics tool refuses), and so
does strom; the group coordinator recreates it on next use. ZooKeeper not answering is
REQUEST_TIMED_OUT for that topic (see Controller.delete_topic), not a dropped connection.
"""

from __future__ import annotations

from collections import Counter

from strom.cluster import model
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError, RequestTimedOutError
from strom.security.acl import Operation
from strom.server.authorization import TOPIC, allowed

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 0
MAX_VERSION = 6


def _requested(request) -> list[tuple[str | None, object]]:
    """(name, topic_id) pairs: v1-5 list names, v6 lists {name, topic_id} entries."""
    entries = field_value(request, "topics")
    if entries is not None:
        return [(field_value(t, "name"), field_value(t, "topic_id")) for t in entries]
    return [(name, None) for name in field_value(request, "topic_names", ())]


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    results: list[dict] = []

    def result(name, topic_id, error=ErrorCode.NONE, message=None) -> None:
        results.append({"name": name, "topic_id": topic_id, "error_code": error, "error_message": message})

    requested = _requested(request)
    if not broker.config.delete_topic_enable:
        error = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        for name, topic_id in requested:
            result(name, topic_id, error, "topic deletion is disabled (delete.topic.enable=false)")
        return _response(version, results)

    name_counts = Counter(n for n, i in requested if n is not None and i is None)
    id_counts = Counter(i for n, i in requested if n is None and i is not None)
    by_id = {info.topic_id: name for name, info in broker.metadata.topics.items()}
    todo: list[tuple[str, object]] = []
    reported: set = set()  # a duplicate gets one result, as in Kafka
    for name, topic_id in requested:
        if name is None and topic_id is None:
            result(None, None, ErrorCode.INVALID_REQUEST, "neither topic name nor id was given")
        elif name is not None and topic_id is not None:
            result(name, topic_id, ErrorCode.INVALID_REQUEST, "give a topic name or a topic id, not both")
        elif topic_id is not None and id_counts[topic_id] > 1:
            if topic_id not in reported:
                reported.add(topic_id)
                result(None, topic_id, ErrorCode.INVALID_REQUEST, "duplicate topic id")
        elif topic_id is not None:
            if topic_id in by_id:
                todo.append((by_id[topic_id], topic_id))
            else:
                result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}")
        else:
            assert name is not None  # a request with neither took the first branch
            if name_counts[name] > 1:
                if name not in reported:
                    reported.add(name)
                    result(name, None, ErrorCode.INVALID_REQUEST, "duplicate topic name")
            else:
                todo.append((name, None))

    deleted = False
    for name, topic_id in todo:
        info = broker.metadata.topics.get(name)
        if not allowed(ctx, Operation.DELETE, TOPIC, name):
            result(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            continue
        try:
            broker.controller.delete_topic(name)
            deleted = True
            result(name, topic_id if topic_id is not None else (info.topic_id if info else None))
        except KafkaError as exc:
            result(name, topic_id, exc.error_code, exc.message)
            if isinstance(exc, RequestTimedOutError):  # the topic may be gone, or part of it: read it again
                broker.request_metadata_reload(model.BROKERS_TOPICS)
    if deleted:
        broker.read_back({model.BROKERS_TOPICS})
    return _response(version, results)


def _response(version: int, results: list[dict]):
    return build(response_class_for(API_KEY, version), {"throttle_time": 0, "responses": results})
