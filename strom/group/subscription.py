"""Reading the topics out of a consumer's subscription metadata (ConsumerProtocolSubscription).

The coordinator otherwise treats protocol metadata as opaque; it needs the topics only to
answer OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) and to show them in tools, as Kafka does.
"""

from __future__ import annotations

import struct


def subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topics array comes first)."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, position)
        position += 4
        topics = set()
        for _ in range(max(0, min(count, len(metadata)))):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            topics.add(metadata[position : position + length].decode("utf-8", "replace"))
            position += length
        return topics
    except struct.error:
        return set()
