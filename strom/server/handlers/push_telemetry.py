"""PushTelemetry (KIP-714): accepted and dropped, checked as Kafka's ClientMetricsManager checks it.

Clients only push after a subscription that requests metrics, which strom never hands out (see
get_telemetry_subscriptions), so a push is a client that kept an old subscription or one probing
the broker; it is answered with Kafka's error codes, so a client acts as it would against Kafka:
a stale subscription id makes it fetch the current (empty) subscription again.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.server.handlers.get_telemetry_subscriptions import (
    ACCEPTED_COMPRESSION_TYPES,
    SUBSCRIPTION_ID,
    TELEMETRY_MAX_BYTES,
    ZERO_UUID,
)

API_KEY = ApiKey.PUSH_TELEMETRY
MIN_VERSION = 0
MAX_VERSION = 0


def _error(request) -> ErrorCode:
    if request.client_instance_id is None or request.client_instance_id == ZERO_UUID:
        return ErrorCode.INVALID_REQUEST
    if request.subscription_id != SUBSCRIPTION_ID:
        return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    if request.compression_type != 0 and request.compression_type not in ACCEPTED_COMPRESSION_TYPES:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if len(request.metrics) > TELEMETRY_MAX_BYTES:
        return ErrorCode.TELEMETRY_TOO_LARGE
    return ErrorCode.NONE


def handle(ctx, request):
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": _error(request)})
