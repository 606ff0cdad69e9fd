"""SaslAuthenticate outside a SASL login (see sasl_handshake): ILLEGAL_SASL_STATE, as Kafka."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode

API_KEY = ApiKey.SASL_AUTHENTICATE
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, request):
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "auth_bytes": b"",
            "error_message": "SaslAuthenticate request received while no SASL authentication is in progress",
        },
    )
