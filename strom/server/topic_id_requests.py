"""Requests that name topics by id (OffsetCommit and OffsetFetch v10, Kafka 4.1): resolved to names
at the door, so that the handlers, the authorizer and the group coordinator keep working with names.

An id this broker's metadata does not know is answered UNKNOWN_TOPIC_ID for each of its partitions,
as Kafka does; the answer names every topic by id again.
"""

from __future__ import annotations

import uuid
from typing import Any

TOPIC_ID_VERSION = 10


class NamedTopic:
    """A request's topic with its id resolved: what the name-based code reads (``name``, partitions)."""

    __slots__ = ("name", "topic_id", "partitions", "partition_indexes")

    def __init__(self, name: str, topic: Any) -> None:
        self.name = name
        self.topic_id = topic.topic_id
        self.partitions = getattr(topic, "partitions", ())
        self.partition_indexes = getattr(topic, "partition_indexes", ())


def resolve(broker: Any, topics: Any) -> tuple[list[NamedTopic], list[Any]]:
    """(the topics whose id is known, with their names; the request's topics whose id is not)."""
    known, unknown = [], []
    for topic in topics:
        name = broker.topic_name_by_id(topic.topic_id) if topic.topic_id is not None else None
        if name is None:
            unknown.append(topic)
        else:
            known.append(NamedTopic(name, topic))
    return known, unknown


def topic_id_of(broker: Any, name: str) -> uuid.UUID | None:
    info = broker.metadata.topics.get(name)
    return info.topic_id if info is not None else None
