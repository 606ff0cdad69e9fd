"""SaslHandshake outside a SASL login: on a connection that needs none or has already logged in.

The login itself is the connection's business (strom.server.secure_connection); a handshake that
reaches the handler table comes from a PLAINTEXT or SSL listener or after authentication, and is
answered ILLEGAL_SASL_STATE as Kafka answers it.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode

API_KEY = ApiKey.SASL_HANDSHAKE
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    return build(
        response_class_for(API_KEY, ctx.api_version), {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    )
