"""GetTelemetrySubscriptions (KIP-714): an empty subscription, so clients ask once per push interval.

librdkafka (2.5+) and the Java client (3.7+) ask every broker that advertises this API which
metrics to push. strom collects no client metrics, and the cheapest answer that is still a valid
one is Kafka's for a client that no client-metrics resource matches: no requested metrics, Kafka's
default five-minute interval. A client that gets it schedules its next GetTelemetrySubscriptions
after that interval and never pushes; an error instead would make librdkafka retry and log it.
The answer is stateless (no per-client table to grow): the instance id is echoed, or made when the
client sends the zero id, and the subscription id is fixed because the subscription never changes.
"""

from __future__ import annotations

import uuid
import zlib

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode

API_KEY = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
MIN_VERSION = 0
MAX_VERSION = 0
PUSH_INTERVAL_MS = 300_000  # Kafka's ClientMetricsConfigs.DEFAULT_INTERVAL_MS
TELEMETRY_MAX_BYTES = 1024 * 1024  # Kafka's telemetry.max.bytes default
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's preference order
SUBSCRIPTION_ID = zlib.crc32(b"strom: no metrics requested") & 0x7FFFFFFF
ZERO_UUID = uuid.UUID(int=0)


def handle(ctx, request):
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == ZERO_UUID:
        instance_id = uuid.uuid4()
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": ErrorCode.NONE,
            "client_instance_id": instance_id,
            "subscription_id": SUBSCRIPTION_ID,
            "accepted_compression_types": ACCEPTED_COMPRESSION_TYPES,
            "push_interval": PUSH_INTERVAL_MS,
            "telemetry_max_bytes": TELEMETRY_MAX_BYTES,
            "delta_temporality": True,
            "requested_metrics": [],
        },
    )
